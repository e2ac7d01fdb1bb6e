package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Debezium's outbox event router with table.expand.json.payload=true parses
// a string payload that starts with '{' or '[' and infers a Kafka Connect
// schema from it; JsonConverter then writes the resulting struct. The
// inference, as the router does it:
//   - strings, booleans: optional string, boolean;
//   - integers: int32 when they fit, else int64; other numbers: double
//     (written back as Java writes a double: 1e3 becomes 1000.0);
//   - objects: an optional struct named after the path (payload, payload.a,
//     …), fields in document order; fields whose value is null or an
//     empty array are left out;
//   - arrays: of the schema of their first non-null element; elements of
//     other types make the inference fail.
// When inference fails (or the text does not start with '{' or '['), the
// router keeps the string, as the plain json converters write it. Where
// the router's own conversion fails (integers beyond 64 bits, a top-level
// array, arrays of objects of different shapes, whose merged field order
// depends on Java hash codes), the connector's task stops; here the row is
// set aside with that reason instead.

// errNotReproduced marks payloads the expanded converters refuse: the
// router would stop the connector on them, or its output cannot be
// reproduced.
var errNotReproduced = errors.New("expanded JSON payload")

// errNoExpansion is the router's fallback: the payload stays a string.
var errNoExpansion = errors.New("no expansion")

// jnode is a parsed JSON value, keys in document order.
type jnode struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	text  string
	keys  []string
	elems []*jnode // object values (parallel to keys) or array elements
}

// Jackson's default limits (StreamReadConstraints, StreamWriteConstraints):
// 1000 levels of nesting when reading and when writing, 1000 digits of an
// integer when reading.
const (
	jacksonMaxDepth  = 1000
	jacksonMaxDigits = 1000
)

// errJacksonLimit is a payload Jackson refuses to read.
var errJacksonLimit = errors.New("beyond Jackson's read limits")

// parseJSON parses the first JSON value of src as Jackson's readTree does:
// a repeated key keeps its first position and takes the last value;
// deeper nesting or longer integers than Jackson reads are errors.
func parseJSON(src []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	return parseValue(dec, 0)
}

func parseValue(dec *json.Decoder, depth int) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth++; depth > jacksonMaxDepth {
			return nil, errJacksonLimit
		}
		if t == '{' {
			return parseObject(dec, depth)
		}
		return parseArray(dec, depth) // Token never returns a closing delimiter here
	case string:
		return &jnode{kind: 's', text: t}, nil
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") && len(strings.TrimPrefix(string(t), "-")) > jacksonMaxDigits {
			return nil, errJacksonLimit
		}
		return &jnode{kind: 'n', text: string(t)}, nil
	case bool:
		return &jnode{kind: 'b', text: strconv.FormatBool(t)}, nil
	}
	return &jnode{kind: 'z'}, nil
}

func parseObject(dec *json.Decoder, depth int) (*jnode, error) {
	n := &jnode{kind: 'o'}
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		v, err := parseValue(dec, depth)
		if err != nil {
			return nil, err
		}
		if i, ok := index[key]; ok {
			n.elems[i] = v
			continue
		}
		index[key] = len(n.keys)
		n.keys, n.elems = append(n.keys, key), append(n.elems, v)
	}
	_, err := dec.Token()
	return n, err
}

func parseArray(dec *json.Decoder, depth int) (*jnode, error) {
	n := &jnode{kind: 'a'}
	for dec.More() {
		v, err := parseValue(dec, depth)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
	}
	_, err := dec.Token()
	return n, err
}

// cschema is an inferred Kafka Connect schema; every one is optional.
type cschema struct {
	typ    string // string, boolean, int32, int64, double, array, struct
	name   string // a struct's name
	named  bool   // the name is set (a struct inside an array of arrays has none)
	fields []cfield
	items  *cschema
}

type cfield struct {
	name   string
	schema *cschema
}

// numberType is the schema type of a number as Jackson reads it.
func numberType(text string) string {
	if strings.ContainsAny(text, ".eE") {
		return "double"
	}
	i, err := strconv.ParseInt(text, 10, 64)
	switch {
	case err != nil:
		return "double" // a BigInteger: inferred as double, converted as a decimal (which fails)
	case i >= math.MinInt32 && i <= math.MaxInt32:
		return "int32"
	}
	return "int64"
}

// infer is the router's schema of n; nil when the router leaves the value
// out (null, an empty array). path is the key the router names structs
// after; named false stands for its null.
func infer(path string, named bool, n *jnode) (*cschema, error) {
	switch n.kind {
	case 's':
		return &cschema{typ: "string"}, nil
	case 'b':
		return &cschema{typ: "boolean"}, nil
	case 'n':
		return &cschema{typ: numberType(n.text)}, nil
	case 'a':
		if len(n.elems) == 0 {
			return nil, nil
		}
		items, err := inferItems(path, named, n)
		if err != nil {
			return nil, err
		}
		return &cschema{typ: "array", items: items}, nil
	case 'o':
		return inferStruct(path, named, n)
	}
	return nil, nil
}

func inferStruct(path string, named bool, n *jnode) (*cschema, error) {
	s := &cschema{typ: "struct", name: path, named: named}
	seen := map[string]bool{}
	for i, k := range n.keys {
		key := k // the router's field key: the path unless it is null or blank
		if named && strings.TrimSpace(path) != "" {
			key = path + "." + k
		}
		fs, err := infer(key, true, n.elems[i])
		if err != nil {
			return nil, err
		}
		if fs != nil && k == "" {
			return nil, errNoExpansion // Kafka Connect refuses an empty field name
		}
		if fs != nil && !seen[k] {
			seen[k] = true
			s.fields = append(s.fields, cfield{name: k, schema: fs})
		}
	}
	return s, nil
}

// inferItems is an array's element schema: all non-null elements must be
// of one type (numbers of one schema type); objects must agree on their
// schema.
func inferItems(path string, named bool, n *jnode) (*cschema, error) {
	ref, err := arrayRef(n)
	if err != nil {
		return nil, err
	}
	if ref.kind == 'o' {
		return inferObjectItems(path, named, n)
	}
	s, err := infer("", false, ref)
	if err == nil && s == nil {
		err = errNoExpansion
	}
	return s, err
}

// arrayRef is the first non-null element, once every non-null element is
// known to be of its type: else the router's "not a homogenous array" or,
// for only nulls, "unrecognized member schema".
func arrayRef(n *jnode) (*jnode, error) {
	var ref *jnode
	for _, e := range n.elems {
		if e.kind == 'z' {
			continue
		}
		if ref == nil {
			ref = e
		}
		if e.kind != ref.kind || e.kind == 'n' && numberType(e.text) != numberType(ref.text) {
			return nil, errNoExpansion
		}
	}
	if ref == nil {
		return nil, errNoExpansion
	}
	return ref, nil
}

// inferObjectItems is the schema of an array's objects, which must agree.
func inferObjectItems(path string, named bool, n *jnode) (*cschema, error) {
	var first *cschema
	for _, e := range n.elems {
		if e.kind != 'o' {
			continue
		}
		s, err := inferStruct(path, named, e)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = s
		} else if !sameSchema(first, s) {
			return nil, fmt.Errorf("%w: objects of different fields in one array (the router merges their schemas in an order of Java hash codes)", errNotReproduced)
		}
	}
	return first, nil
}

func sameSchema(a, b *cschema) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.typ != b.typ || a.name != b.name || a.named != b.named || len(a.fields) != len(b.fields) || !sameSchema(a.items, b.items) {
		return false
	}
	for i := range a.fields {
		if a.fields[i].name != b.fields[i].name || !sameSchema(a.fields[i].schema, b.fields[i].schema) {
			return false
		}
	}
	return true
}

// appendConnectSchema appends s as JsonConverter writes a schema; field,
// when not nil, is the name of the struct field it is the schema of.
func appendConnectSchema(dst []byte, s *cschema, field *string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, s.typ...)
	dst = append(dst, '"')
	switch s.typ {
	case "array":
		dst = append(dst, `,"items":`...)
		dst = appendConnectSchema(dst, s.items, nil)
	case "struct":
		dst = append(dst, `,"fields":[`...)
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendConnectSchema(dst, f.schema, &f.name)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"optional":true`...)
	if s.named {
		dst = append(dst, `,"name":`...)
		dst = appendJacksonString(dst, []byte(s.name))
	}
	if field != nil {
		dst = append(dst, `,"field":`...)
		dst = appendJacksonString(dst, []byte(*field))
	}
	return append(dst, '}')
}

// appendConnectValue appends n, converted to s as the router does, as
// JsonConverter writes it.
func appendConnectValue(dst []byte, s *cschema, n *jnode) ([]byte, error) {
	if n == nil || n.kind == 'z' {
		return append(dst, "null"...), nil
	}
	switch s.typ {
	case "string":
		return appendJacksonString(dst, []byte(n.text)), nil
	case "boolean", "int32", "int64":
		return append(dst, n.text...), nil
	case "double":
		return appendDouble(dst, n.text)
	case "array":
		dst = append(dst, '[')
		for i, e := range n.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendConnectValue(dst, s.items, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	return appendStruct(dst, s, n)
}

// appendStruct writes the fields of s in order, null where n lacks one.
func appendStruct(dst []byte, s *cschema, n *jnode) ([]byte, error) {
	dst = append(dst, '{')
	for i, f := range s.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJacksonString(dst, []byte(f.name)), ':')
		var v *jnode
		for j := len(n.keys) - 1; j >= 0; j-- {
			if n.keys[j] == f.name {
				v = n.elems[j]
				break
			}
		}
		var err error
		if dst, err = appendConnectValue(dst, f.schema, v); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendDouble writes a number the router converted to a double; an
// integer beyond 64 bits becomes a decimal, which a double field refuses.
func appendDouble(dst []byte, text string) ([]byte, error) {
	if !strings.ContainsAny(text, ".eE") {
		return dst, fmt.Errorf("%w: the integer %s does not fit 64 bits (the router's conversion fails on it)", errNotReproduced, TruncateName(text))
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%w: the number %s is beyond a double", errNotReproduced, TruncateName(text))
	}
	return appendJavaDouble(dst, f), nil
}

// expandedConverter writes the router's expanded payload.
type expandedConverter struct {
	schemas  bool
	optional bool   // the payload column is nullable (the fallback string's schema)
	name     string // the payload column: the top struct's name
}

func (c expandedConverter) AppendValue(dst []byte, e *Event) ([]byte, bool, error) {
	doc, s, err := c.expand(e)
	switch {
	case errors.Is(err, errNoExpansion):
		return jsonConverter{schemas: c.schemas, optional: c.optional}.AppendValue(dst, e)
	case err != nil:
		return dst, false, fmt.Errorf("event %s: %w", e.ID, err)
	case s == nil: // an empty top-level array: no schema, the string kept
		return c.appendSchemaless(dst, e), true, nil
	}
	start := len(dst)
	if c.schemas {
		dst = append(dst, `{"schema":`...)
		dst = appendConnectSchema(dst, s, nil)
		dst = append(dst, `,"payload":`...)
	}
	if dst, err = appendConnectValue(dst, s, doc); err != nil {
		return dst[:start], false, fmt.Errorf("event %s: %w", e.ID, err)
	}
	if c.schemas {
		dst = append(dst, '}')
	}
	if jsonDepth(dst[start:]) > jacksonMaxDepth {
		return dst[:start], false, fmt.Errorf("event %s: %w: nested deeper than the %d levels Jackson writes (the router's conversion fails on it)", e.ID, errNotReproduced, jacksonMaxDepth)
	}
	return dst, true, nil
}

// jsonDepth is the deepest nesting of objects and arrays in JSON text.
func jsonDepth(b []byte) int {
	depth, most := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i+1) - 1
		case '{', '[':
			if depth++; depth > most {
				most = depth
			}
		case '}', ']':
			depth--
		}
	}
	return most
}

// expand parses e's payload and infers its schema as the router does;
// errNoExpansion when the router keeps the string, errNotReproduced where
// its conversion fails.
func (c expandedConverter) expand(e *Event) (*jnode, *cschema, error) {
	p := e.Payload
	if e.NoPayload || e.PayloadKind == PayloadBinary || len(p) == 0 || p[0] != '{' && p[0] != '[' {
		return nil, nil, errNoExpansion
	}
	doc, err := parseJSON(p)
	if err != nil {
		return nil, nil, errNoExpansion
	}
	s, err := infer(c.name, true, doc)
	if err == nil && s != nil && s.typ != "struct" {
		err = fmt.Errorf("%w: a top-level array (the router's conversion fails on it)", errNotReproduced)
	}
	return doc, s, err
}

// appendSchemaless writes the string payload under no schema.
func (c expandedConverter) appendSchemaless(dst []byte, e *Event) []byte {
	if c.schemas {
		dst = append(dst, `{"schema":null,"payload":`...)
	}
	dst = appendJacksonString(dst, e.Payload)
	if c.schemas {
		dst = append(dst, '}')
	}
	return dst
}

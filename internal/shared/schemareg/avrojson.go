package schemareg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// avroWriter writes JSON text in Avro's binary encoding straight from the
// text: no intermediate values, so the common payload costs no allocation.
// A record's members are located first (their spans kept in a scratch
// slice) and then written in the schema's field order.
type avroWriter struct {
	plans   map[*avro.RecordSchema]*recordPlan
	scratch sync.Pool // *[]span
}

// recordPlan is what writing a record needs, computed once per schema.
type recordPlan struct {
	fields   []*avro.Field
	index    map[string]int
	defaults [][]byte // JSON of each field's default (a union's first branch), nil when none
}

// span is one JSON value's bytes within the payload.
type span struct{ start, end int }

// maxDepth bounds the nesting of a payload.
const maxDepth = 256

func newAvroWriter(s avro.Schema) (*avroWriter, error) {
	w := &avroWriter{plans: map[*avro.RecordSchema]*recordPlan{}}
	w.scratch.New = func() any { s := make([]span, 0, 64); return &s }
	return w, w.plan(s)
}

// plan computes the plans of every record in s.
func (w *avroWriter) plan(s avro.Schema) error {
	switch s := s.(type) {
	case *avro.RecordSchema:
		if w.plans[s] != nil {
			return nil
		}
		p := &recordPlan{fields: s.Fields(), index: map[string]int{}, defaults: make([][]byte, len(s.Fields()))}
		w.plans[s] = p
		for i, f := range s.Fields() {
			p.index[f.Name()] = i
			if f.HasDefault() {
				b, err := defaultJSON(f)
				if err != nil {
					return err
				}
				p.defaults[i] = b
			}
			if err := w.plan(f.Type()); err != nil {
				return err
			}
		}
	case *avro.UnionSchema:
		for _, t := range s.Types() {
			if err := w.plan(t); err != nil {
				return err
			}
		}
	case *avro.ArraySchema:
		return w.plan(s.Items())
	case *avro.MapSchema:
		return w.plan(s.Values())
	}
	return nil
}

// defaultJSON is a field's default as JSON text (of the first branch for a
// union: the writer then writes branch 0).
func defaultJSON(f *avro.Field) ([]byte, error) {
	def := f.Default()
	if bs, ok := def.([]byte); ok {
		def = string(bs)
	}
	return json.Marshal(def)
}

// write appends payload (one JSON value) encoded under s.
func (w *avroWriter) write(dst, payload []byte, s avro.Schema) ([]byte, error) {
	sp := w.scratch.Get().(*[]span)
	defer w.scratch.Put(sp)
	st := &jsonState{b: payload, spans: (*sp)[:0], w: w}
	start := skipWS(payload, 0)
	end, err := skipValue(payload, start, 0)
	if err != nil {
		return dst, err
	}
	if skipWS(payload, end) != len(payload) {
		return dst, errNotJSON("more after the value")
	}
	dst, err = st.value(dst, s, span{start, end}, 0)
	*sp = st.spans[:0]
	return dst, err
}

// jsonState is one payload being written.
type jsonState struct {
	b     []byte
	spans []span // a stack of the records' member spans
	w     *avroWriter
}

func (st *jsonState) value(dst []byte, s avro.Schema, v span, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, mismatchf("nested deeper than %d", maxDepth)
	}
	raw := st.b[v.start:v.end]
	switch s := s.(type) {
	case *avro.RefSchema:
		return st.value(dst, s.Schema(), v, depth)
	case *avro.RecordSchema:
		return st.record(dst, s, v, depth)
	case *avro.UnionSchema:
		return st.union(dst, s, v, depth)
	case *avro.ArraySchema:
		return st.array(dst, s, v, depth)
	case *avro.MapSchema:
		return st.mapValue(dst, s, v, depth)
	case *avro.EnumSchema:
		return enumValue(dst, s, raw)
	case *avro.FixedSchema:
		return fixedValue(dst, s, raw)
	case *avro.PrimitiveSchema, *avro.NullSchema:
		return primitive(dst, s.Type(), raw)
	}
	return dst, mismatchf("unsupported avro type %s", s.Type())
}

func orMismatch(err error, format string, a ...any) error {
	if err != nil {
		return err
	}
	return mismatchf(format, a...)
}

// enumValue writes a JSON string as the index of its symbol in the enum.
func enumValue(dst []byte, s *avro.EnumSchema, raw []byte) ([]byte, error) {
	str, ok, err := stringOf(raw)
	if err != nil || !ok {
		return dst, orMismatch(err, "expected a symbol of enum %s, got %s", s.FullName(), rawKind(raw))
	}
	for i, sym := range s.Symbols() {
		if sym == string(str) {
			return appendVarint(dst, int64(i)), nil
		}
	}
	return dst, mismatchf("%q is not a symbol of enum %s", str, s.FullName())
}

// fixedValue writes a JSON string of code points 0-255 as a fixed of
// exactly its size.
func fixedValue(dst []byte, s *avro.FixedSchema, raw []byte) ([]byte, error) {
	b, err := rawCodePoints(raw)
	if err != nil {
		return dst, err
	}
	if len(b) != s.Size() {
		return dst, mismatchf("fixed %s takes %d bytes, got %d", s.FullName(), s.Size(), len(b))
	}
	return append(dst, b...), nil
}

// primitive writes a JSON value as the Avro primitive type t.
func primitive(dst []byte, t avro.Type, raw []byte) ([]byte, error) {
	switch t {
	case avro.Null:
		if string(raw) != "null" {
			return dst, mismatchf("expected null, got %s", rawKind(raw))
		}
		return dst, nil
	case avro.Boolean:
		return booleanValue(dst, raw)
	case avro.Int, avro.Long:
		return integerValue(dst, t, raw)
	case avro.Float, avro.Double:
		return floatValue(dst, t, raw)
	case avro.String:
		str, ok, err := stringOf(raw)
		if err != nil || !ok {
			return dst, orMismatch(err, "expected string, got %s", rawKind(raw))
		}
		dst = appendVarint(dst, int64(len(str)))
		return append(dst, str...), nil
	case avro.Bytes:
		b, err := rawCodePoints(raw)
		if err != nil {
			return dst, err
		}
		dst = appendVarint(dst, int64(len(b)))
		return append(dst, b...), nil
	}
	return dst, mismatchf("unsupported avro type %s", t)
}

// booleanValue writes JSON true or false as one byte.
func booleanValue(dst, raw []byte) ([]byte, error) {
	switch string(raw) {
	case "true":
		return append(dst, 1), nil
	case "false":
		return append(dst, 0), nil
	}
	return dst, mismatchf("expected boolean, got %s", rawKind(raw))
}

// integerValue writes a JSON integer as a zig-zag varint, within the range
// of t (int or long).
func integerValue(dst []byte, t avro.Type, raw []byte) ([]byte, error) {
	if !isNumber(raw) {
		return dst, mismatchf("expected %s, got %s", t, rawKind(raw))
	}
	i, ok := parseInt(raw)
	if !ok {
		return dst, mismatchf("%s is not a %s (an integer in its range)", raw, t)
	}
	if t == avro.Int && (i < math.MinInt32 || i > math.MaxInt32) {
		return dst, mismatchf("%s is out of the range of int", raw)
	}
	return appendVarint(dst, i), nil
}

// floatValue writes a JSON number as a little-endian IEEE 754 float or
// double (t).
func floatValue(dst []byte, t avro.Type, raw []byte) ([]byte, error) {
	if !isNumber(raw) {
		return dst, mismatchf("expected %s, got %s", t, rawKind(raw))
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return dst, mismatchf("%s out of the range of %s", raw, t)
	}
	if t == avro.Float {
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
	}
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
}

func (st *jsonState) record(dst []byte, s *avro.RecordSchema, v span, depth int) ([]byte, error) {
	raw := st.b[v.start:v.end]
	if raw[0] != '{' {
		return dst, mismatchf("expected record %s (an object), got %s", s.FullName(), rawKind(raw))
	}
	p := st.w.plans[s]
	base := len(st.spans)
	for range p.fields {
		st.spans = append(st.spans, span{-1, -1})
	}
	defer func() { st.spans = st.spans[:base] }()
	err := st.members(v, depth, func(key []byte, val span) error {
		i, ok := p.index[string(key)]
		if !ok {
			return within(mismatchf("not a field of record %s", s.FullName()), "."+string(key))
		}
		st.spans[base+i] = val
		return nil
	})
	if err != nil {
		return dst, err
	}
	for i, f := range p.fields {
		fv := st.spans[base+i]
		switch {
		case fv.start >= 0:
			dst, err = st.value(dst, f.Type(), fv, depth+1)
		case p.defaults[i] != nil:
			dst, err = writeDefault(dst, st.w, f, p.defaults[i])
		default:
			err = mismatchf("missing field without a default")
		}
		if err != nil {
			return dst, within(err, "."+f.Name())
		}
	}
	return dst, nil
}

// writeDefault writes a field's default JSON.
func writeDefault(dst []byte, w *avroWriter, f *avro.Field, def []byte) ([]byte, error) {
	t := f.Type()
	if u, ok := t.(*avro.UnionSchema); ok {
		dst = appendVarint(dst, 0)
		t = u.Types()[0]
	}
	return w.write(dst, def, t)
}

// members calls fn with each member of the object at v: its key
// (unescaped) and its value's span.
func (st *jsonState) members(v span, depth int, fn func(key []byte, val span) error) error {
	b := st.b
	i := skipWS(b, v.start+1)
	if i < v.end && b[i] == '}' {
		return nil
	}
	for {
		kEnd, err := skipString(b, i)
		if err != nil {
			return err
		}
		key, _, err := stringOf(b[i:kEnd])
		if err != nil {
			return err
		}
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return errNotJSON("expected ':'")
		}
		vs := skipWS(b, i+1)
		ve, err := skipValue(b, vs, depth+1)
		if err != nil {
			return err
		}
		if err := fn(key, span{vs, ve}); err != nil {
			return err
		}
		i = skipWS(b, ve)
		if b[i] == '}' {
			return nil
		}
		i = skipWS(b, i+1) // ','
	}
}

// elements calls fn with the span of each element of the array at v.
func (st *jsonState) elements(v span, depth int, fn func(n int, val span) error) error {
	b := st.b
	i := skipWS(b, v.start+1)
	if b[i] == ']' {
		return nil
	}
	for n := 0; ; n++ {
		e, err := skipValue(b, i, depth+1)
		if err != nil {
			return err
		}
		if err := fn(n, span{i, e}); err != nil {
			return err
		}
		i = skipWS(b, e)
		if b[i] == ']' {
			return nil
		}
		i = skipWS(b, i+1)
	}
}

func (st *jsonState) union(dst []byte, s *avro.UnionSchema, v span, depth int) ([]byte, error) {
	types := s.Types()
	raw := st.b[v.start:v.end]
	if raw[0] == '{' {
		if i, inner, ok := st.wrapped(types, v, depth); ok {
			return st.value(appendVarint(dst, int64(i)), types[i], inner, depth+1)
		}
	}
	isNull := string(raw) == "null"
	mark := len(dst)
	for i, t := range types {
		if isNull != (t.Type() == avro.Null) {
			continue
		}
		out, err := st.value(appendVarint(dst, int64(i)), t, v, depth+1)
		if err == nil {
			return out, nil
		}
		if len(types) == 1 || (len(types) == 2 && s.Nullable() && !isNull) {
			return out[:mark], err // the one branch that could take it: its reason
		}
		dst = out[:mark]
	}
	return dst, mismatchf("%s matches no branch of union %s", rawKind(raw), unionNames(types))
}

// wrapped reads Avro's JSON form of a union value, {"branch": value}.
func (st *jsonState) wrapped(types avro.Schemas, v span, depth int) (int, span, bool) {
	n, branch := 0, -1
	var inner span
	_ = st.members(v, depth, func(key []byte, val span) error {
		n++
		branch, inner = branchNamed(types, string(key)), val
		return nil
	})
	return branch, inner, n == 1 && branch >= 0
}

func (st *jsonState) array(dst []byte, s *avro.ArraySchema, v span, depth int) ([]byte, error) {
	raw := st.b[v.start:v.end]
	if raw[0] != '[' {
		return dst, mismatchf("expected array, got %s", rawKind(raw))
	}
	count := 0
	_ = st.elements(v, depth, func(int, span) error { count++; return nil }) // counting fails on nothing
	if count > 0 {
		dst = appendVarint(dst, int64(count))
		var err error
		if perr := st.elements(v, depth, func(n int, e span) error {
			if dst, err = st.value(dst, s.Items(), e, depth+1); err != nil {
				return within(err, "["+strconv.Itoa(n)+"]")
			}
			return nil
		}); perr != nil {
			return dst, perr
		}
	}
	return append(dst, 0), nil
}

func (st *jsonState) mapValue(dst []byte, s *avro.MapSchema, v span, depth int) ([]byte, error) {
	raw := st.b[v.start:v.end]
	if raw[0] != '{' {
		return dst, mismatchf("expected map (an object), got %s", rawKind(raw))
	}
	count := 0
	if err := st.members(v, depth, func([]byte, span) error { count++; return nil }); err != nil {
		return dst, err // a key that is not UTF-8
	}
	if count > 0 {
		dst = appendVarint(dst, int64(count))
		var err error
		if perr := st.members(v, depth, func(key []byte, e span) error {
			dst = appendVarint(dst, int64(len(key)))
			dst = append(dst, key...)
			if dst, err = st.value(dst, s.Values(), e, depth+1); err != nil {
				return within(err, "["+strconv.Quote(string(key))+"]")
			}
			return nil
		}); perr != nil {
			return dst, perr
		}
	}
	return append(dst, 0), nil
}

// errNotJSON is a payload that is not JSON text: the event's fault.
func errNotJSON(why string) error { return &notJSON{why} }

type notJSON struct{ why string }

func (e *notJSON) Error() string { return "payload is not JSON: " + e.why }

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value starting at i, checking it.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errNotJSON("unexpected end")
	}
	if depth > maxDepth {
		return i, errNotJSON("nested too deep")
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		return skipContainer(b, i, depth)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	}
	return i, errNotJSON("unexpected character " + strconv.QuoteRune(rune(b[i])))
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, errNotJSON("bad literal")
	}
	return i + len(lit), nil
}

func skipNumber(b []byte, i int) (int, error) {
	start := i
	for i < len(b) && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || (b[i] >= '0' && b[i] <= '9')) {
		i++
	}
	if !json.Valid(b[start:i]) {
		return i, errNotJSON("bad number")
	}
	return i, nil
}

func skipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, errNotJSON("expected a string")
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			i++
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return i, errNotJSON("a control character in a string")
		}
	}
	return i, errNotJSON("unterminated string")
}

func skipContainer(b []byte, i, depth int) (int, error) {
	closing := byte('}')
	if b[i] == '[' {
		closing = ']'
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, nil
	}
	for {
		if closing == '}' {
			e, err := skipString(b, i)
			if err != nil {
				return e, err
			}
			i = skipWS(b, e)
			if i >= len(b) || b[i] != ':' {
				return i, errNotJSON("expected ':'")
			}
			i = skipWS(b, i+1)
		}
		e, err := skipValue(b, i, depth+1)
		if err != nil {
			return e, err
		}
		i = skipWS(b, e)
		if i >= len(b) {
			return i, errNotJSON("unexpected end")
		}
		switch b[i] {
		case closing:
			return i + 1, nil
		case ',':
			i = skipWS(b, i+1)
		default:
			return i, errNotJSON("expected ',' or a closing bracket")
		}
	}
}

// stringOf is the text of a JSON string token, unescaped; ok is false when
// raw is not a string.
func stringOf(raw []byte) ([]byte, bool, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false, nil
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		if !utf8.Valid(body) {
			return nil, true, errNotJSON("a string that is not UTF-8")
		}
		return body, true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, true, errNotJSON(err.Error())
	}
	return []byte(s), true, nil
}

// rawCodePoints is Avro's JSON form of bytes: a string of code points
// 0-255.
func rawCodePoints(raw []byte) ([]byte, error) {
	s, ok, err := stringOf(raw)
	if err != nil || !ok {
		return nil, orMismatch(err, "expected bytes (a string of code points 0-255), got %s", rawKind(raw))
	}
	out := make([]byte, 0, len(s))
	for _, r := range string(s) {
		if r > 255 {
			return nil, mismatchf("bytes take code points 0-255, got U+%04X", r)
		}
		out = append(out, byte(r))
	}
	return out, nil
}

func isNumber(raw []byte) bool { return raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') }

// parseInt parses a JSON integer without allocating; false for a fraction,
// an exponent or an overflow.
func parseInt(raw []byte) (int64, bool) {
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// rawKind names the JSON type of a value's text.
func rawKind(raw []byte) string {
	switch raw[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "number " + string(raw)
}

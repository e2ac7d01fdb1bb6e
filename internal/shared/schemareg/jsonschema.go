package schemareg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonSchemaCodec validates a JSON payload against a JSON Schema and
// writes it compacted; the body is the JSON text.
type jsonSchemaCodec struct {
	schema *jsonschema.Schema
}

// jsonSchemaURL is the URL the schema text is compiled under.
const jsonSchemaURL = "mem://schema.json"

func newJSONSchemaCodec(text string) (*jsonSchemaCodec, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse json schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(jsonSchemaURL, doc); err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	s, err := c.Compile(jsonSchemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile json schema: %w", err)
	}
	return &jsonSchemaCodec{schema: s}, nil
}

func (c *jsonSchemaCodec) encode(dst, payload []byte) ([]byte, error) {
	v, err := parseJSON(payload)
	if err != nil {
		return dst, err
	}
	if err := c.schema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return dst, err
		}
		return dst, jsonSchemaMismatch(ve)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

// jsonSchemaMismatch is the deepest failure of a validation: its
// instance location and message.
func jsonSchemaMismatch(ve *jsonschema.ValidationError) error {
	best := jsonschema.OutputUnit{InstanceLocation: "", Error: nil}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error != nil && (best.Error == nil || len(u.InstanceLocation) > len(best.InstanceLocation)) {
			best = u
		}
	}
	m := &mismatch{reason: "does not validate"}
	if best.Error != nil {
		m.reason = best.Error.String()
	}
	for _, seg := range strings.Split(strings.TrimPrefix(best.InstanceLocation, "/"), "/") {
		if seg == "" {
			continue
		}
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m.path = append([]string{pathElem(seg)}, m.path...)
	}
	return m
}

// pathElem is a JSON pointer segment as a path element: [n] for an index,
// .name otherwise.
func pathElem(seg string) string {
	for _, r := range seg {
		if r < '0' || r > '9' {
			return "." + seg
		}
	}
	return "[" + seg + "]"
}

func (c *jsonSchemaCodec) decode(dst, body []byte) ([]byte, error) {
	if !json.Valid(body) {
		return dst, errors.New("json-schema value is not JSON")
	}
	return append(dst, body...), nil
}

package api

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// openAPI is the parsed openapi.json, with a validator for the subset of
// JSON Schema the document uses (OpenAPI 3.0: $ref, type, nullable,
// required, properties, additionalProperties, enum, minLength, maxLength,
// pattern, minimum, maximum, format uuid and date-time).
type openAPI struct {
	raw map[string]any
}

func loadOpenAPI(t testing.TB) *openAPI {
	t.Helper()
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(string(openAPIDoc)))
	dec.UseNumber() // amount's maximum does not fit a float64
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	return &openAPI{raw: raw}
}

// resolve follows a local $ref ("#/a/b").
func (d *openAPI) resolve(ref string) (map[string]any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("non-local $ref %q", ref)
	}
	var cur any = d.raw
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q: %q is not inside an object", ref, part)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q is not an object", ref)
	}
	return m, nil
}

// deref returns m, or what its $ref points to.
func (d *openAPI) deref(m map[string]any) (map[string]any, error) {
	for i := 0; i < 10; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		var err error
		if m, err = d.resolve(ref); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("$ref chain too long")
}

// validate checks v (decoded with UseNumber) against schema.
func (d *openAPI) validate(schema map[string]any, v any, at string) error {
	schema, err := d.deref(schema)
	if err != nil {
		return err
	}
	if v == nil {
		if schema["nullable"] == true {
			return nil
		}
		return fmt.Errorf("%s: null is not allowed", at)
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	switch schema["type"] {
	case "object":
		return d.validateObject(schema, v, at)
	case "string":
		return validateString(schema, v, at)
	case "integer":
		return validateInteger(schema, v, at)
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a boolean", at)
		}
	case nil:
	default:
		return fmt.Errorf("%s: type %v is not supported by the test validator", at, schema["type"])
	}
	return nil
}

func (d *openAPI) validateObject(schema map[string]any, v any, at string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: want an object, got %T", at, v)
	}
	for _, r := range asSlice(schema["required"]) {
		if _, ok := obj[r.(string)]; !ok {
			return fmt.Errorf("%s: missing required %q", at, r)
		}
	}
	props, _ := schema["properties"].(map[string]any)
	for k, fv := range obj {
		ps, ok := props[k].(map[string]any)
		if !ok {
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: unexpected property %q", at, k)
				}
				continue
			case map[string]any:
				ps = ap
			default:
				continue
			}
		}
		if err := d.validate(ps, fv, at+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func validateString(schema map[string]any, v any, at string) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s: want a string, got %T", at, v)
	}
	n := utf8.RuneCountInString(s)
	if min, ok := schema["minLength"].(json.Number); ok && int64(n) < mustInt(min) {
		return fmt.Errorf("%s: shorter than %s", at, min)
	}
	if max, ok := schema["maxLength"].(json.Number); ok && int64(n) > mustInt(max) {
		return fmt.Errorf("%s: longer than %s", at, max)
	}
	if p, ok := schema["pattern"].(string); ok {
		re, err := goRegexp(p)
		if err != nil {
			return fmt.Errorf("%s: pattern %q: %v", at, p, err)
		}
		if !re.MatchString(s) {
			return fmt.Errorf("%s: %q does not match %s", at, s, p)
		}
	}
	switch schema["format"] {
	case "uuid":
		if uuid.Validate(s) != nil {
			return fmt.Errorf("%s: %q is not a uuid", at, s)
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("%s: %q is not a date-time", at, s)
		}
	}
	return nil
}

func validateInteger(schema map[string]any, v any, at string) error {
	num, ok := v.(json.Number)
	if !ok {
		return fmt.Errorf("%s: want an integer, got %T", at, v)
	}
	n, ok := new(big.Int).SetString(num.String(), 10)
	if !ok {
		return fmt.Errorf("%s: %s is not an integer", at, num)
	}
	if min, ok := schema["minimum"].(json.Number); ok && n.Cmp(bigInt(min)) < 0 {
		return fmt.Errorf("%s: %s is below %s", at, num, min)
	}
	if max, ok := schema["maximum"].(json.Number); ok && n.Cmp(bigInt(max)) > 0 {
		return fmt.Errorf("%s: %s is above %s", at, num, max)
	}
	return nil
}

// goRegexp compiles an ECMA-style pattern that uses \uXXXX escapes.
func goRegexp(p string) (*regexp.Regexp, error) {
	return regexp.Compile(regexp.MustCompile(`\\u([0-9a-fA-F]{4})`).ReplaceAllString(p, `\x{$1}`))
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func mustInt(n json.Number) int64 {
	i, err := n.Int64()
	if err != nil {
		panic(err)
	}
	return i
}

func bigInt(n json.Number) *big.Int {
	b, ok := new(big.Int).SetString(n.String(), 10)
	if !ok {
		panic("not an integer: " + n.String())
	}
	return b
}

// decodeJSON decodes b with UseNumber, as validate wants it.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

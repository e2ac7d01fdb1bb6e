package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestOpenAPIDocumentIsWellFormed: the document parses, is OpenAPI 3.0,
// every $ref resolves, every operation answers JSON errors with the Error
// schema, and the /orders operations name the bearer scheme.
func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	d := loadOpenAPI(t)
	if v, _ := d.raw["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		t.Fatalf("openapi = %q, want 3.0.x", v)
	}
	var refs []string
	collectRefs(d.raw, &refs)
	if len(refs) == 0 {
		t.Fatal("no $ref found: the walk is broken")
	}
	for _, ref := range refs {
		if _, err := d.resolve(ref); err != nil {
			t.Error(err)
		}
	}
	if _, err := d.resolve("#/components/securitySchemes/bearerAuth"); err != nil {
		t.Fatal(err)
	}
	for _, op := range docOperations(t, d) {
		if len(op.responses) == 0 {
			t.Errorf("%s has no responses", op.pattern)
		}
		for code, r := range op.responses {
			resp, err := d.deref(r.(map[string]any))
			if err != nil {
				t.Fatal(err)
			}
			if code[0] == '4' || (code[0] == '5' && op.pattern != "GET /readyz") {
				schema := jsonSchema(resp)
				if schema == nil || schema["$ref"] != "#/components/schemas/Error" {
					t.Errorf("%s %s: error answers must use the Error schema, got %v", op.pattern, code, schema)
				}
			}
		}
		secured := len(op.security) > 0
		if wantSecured := strings.Contains(op.pattern, "/orders"); secured != wantSecured {
			t.Errorf("%s: security %v, want bearer only on /orders", op.pattern, op.security)
		}
	}
}

// TestOpenAPIMatchesRoutes: the document has exactly the routes the server
// registers, and each documented operation reaches its own pattern on the
// real mux (not the 404 or 405 fallbacks).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	srv, err := newServer(newPGStore(nil), DefaultConfig(), testLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var registered, documented []string
	for _, r := range srv.routes() {
		registered = append(registered, r.pattern)
	}
	for _, op := range docOperations(t, loadOpenAPI(t)) {
		documented = append(documented, op.pattern)
		method, path, _ := strings.Cut(op.pattern, " ")
		req := httptest.NewRequest(method, strings.ReplaceAll(path, "{id}", "example-1"), nil)
		if _, matched := srv.mux.Handler(req); matched != op.pattern {
			t.Errorf("%s %s reaches pattern %q, want %q", method, req.URL.Path, matched, op.pattern)
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	if !slices.Equal(registered, documented) {
		t.Fatalf("registered routes %v, documented %v", registered, documented)
	}
}

// TestOpenAPIExamplesSucceed sends every request example of POST /orders to
// the real API (with a token, as the document asks), checks the answers
// against the documented schemas and reads each order back.
func TestOpenAPIExamplesSucceed(t *testing.T) {
	t.Parallel()
	const token = "example-token-0123456789"
	a := newTestAPI(t, func(_ *pgStore, c *Config) { c.Token = token })
	d := loadOpenAPI(t)
	post := docOperation(t, d, "POST /orders")
	get := docOperation(t, d, "GET /orders/{id}")

	body, err := d.deref(post.requestBody)
	if err != nil {
		t.Fatal(err)
	}
	examples := body["content"].(map[string]any)["application/json"].(map[string]any)["examples"].(map[string]any)
	if len(examples) < 2 {
		t.Fatalf("%d request examples, want at least 2", len(examples))
	}
	for name, ex := range examples {
		t.Run(name, func(t *testing.T) {
			value := ex.(map[string]any)["value"]
			if err := d.validate(jsonSchema(body), value, "example"); err != nil {
				t.Fatalf("example does not match its own schema: %v", err)
			}
			b, err := json.Marshal(value)
			if err != nil {
				t.Fatal(err)
			}
			r := a.post(t, string(b), "Authorization", "Bearer "+token)
			if r.status != http.StatusCreated {
				t.Fatalf("POST: %d %s, want 201", r.status, r.body)
			}
			checkAnswer(t, d, post, r)

			var c created
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatal(err)
			}
			req := mustRequest(t, http.MethodGet, a.url+"/orders/"+c.ID, "")
			req.Header.Set("Authorization", "Bearer "+token)
			g := do(t, req)
			if g.status != http.StatusOK {
				t.Fatalf("GET: %d %s, want 200", g.status, g.body)
			}
			checkAnswer(t, d, get, g)
		})
	}
	r := a.get(t, "/openapi.json")
	if r.status != http.StatusOK || !bytes.Equal(r.body, openAPIDoc) || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s, want the embedded document", r.status, r.header.Get("Content-Type"))
	}
}

// checkAnswer validates r against the schema op documents for its status.
func checkAnswer(t *testing.T, d *openAPI, op docOp, r reply) {
	t.Helper()
	resp, ok := op.responses[strconv.Itoa(r.status)].(map[string]any)
	if !ok {
		t.Fatalf("%s: status %d is not documented", op.pattern, r.status)
	}
	resp, err := d.deref(resp)
	if err != nil {
		t.Fatal(err)
	}
	v, err := decodeJSON(r.body)
	if err != nil {
		t.Fatalf("%s: answer %s is not JSON: %v", op.pattern, r.body, err)
	}
	if err := d.validate(jsonSchema(resp), v, "answer"); err != nil {
		t.Errorf("%s %d: %v (answer %s)", op.pattern, r.status, err, r.body)
	}
}

// docOp is one operation of the document.
type docOp struct {
	pattern     string // "POST /orders"
	responses   map[string]any
	requestBody map[string]any
	security    []any
}

func docOperations(t testing.TB, d *openAPI) []docOp {
	t.Helper()
	paths, ok := d.raw["paths"].(map[string]any)
	if !ok || len(paths) == 0 {
		t.Fatal("document has no paths")
	}
	var ops []docOp
	for path, item := range paths {
		for method, o := range item.(map[string]any) {
			m, ok := o.(map[string]any)
			if !ok {
				continue // path-level parameters
			}
			op := docOp{pattern: strings.ToUpper(method) + " " + path}
			op.responses, _ = m["responses"].(map[string]any)
			op.requestBody, _ = m["requestBody"].(map[string]any)
			op.security, _ = m["security"].([]any)
			ops = append(ops, op)
		}
	}
	return ops
}

func docOperation(t testing.TB, d *openAPI, pattern string) docOp {
	t.Helper()
	for _, op := range docOperations(t, d) {
		if op.pattern == pattern {
			return op
		}
	}
	t.Fatalf("%s is not documented", pattern)
	return docOp{}
}

// jsonSchema is the application/json schema of a response or request body.
func jsonSchema(m map[string]any) map[string]any {
	content, _ := m["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	schema, _ := media["schema"].(map[string]any)
	return schema
}

func collectRefs(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				*out = append(*out, s)
			}
			collectRefs(e, out)
		}
	case []any:
		for _, e := range v {
			collectRefs(e, out)
		}
	}
}

// TestOpenAPISchemaAgreesWithDecoder: for every body the schema can judge
// (one JSON object without duplicate keys), the NewOrder schema and
// decodeOrder accept and refuse the same ones.
func TestOpenAPISchemaAgreesWithDecoder(t *testing.T) {
	d := loadOpenAPI(t)
	schema := map[string]any{"$ref": "#/components/schemas/NewOrder"}
	unjudgeable := map[string]bool{ // refused by the decoder for what JSON Schema cannot say
		"empty": true, "whitespace only": true, "malformed": true, "not json": true, "duplicate field": true,
		"trailing object": true, "trailing garbage": true, "trailing brace": true,
	}
	bodies := map[string]string{
		"valid":             `{"id":"o-1","customer":"Ada","amount":1250,"currency":"EUR"}`,
		"max amount":        `{"customer":"Ada","amount":9223372036854775807,"currency":"EUR"}`,
		"256 characters":    `{"customer":"` + strings.Repeat("ü", maxCustomerLen) + `","amount":1,"currency":"EUR"}`,
		"null id":           `{"id":null,"customer":"Ada","amount":1,"currency":"EUR"}`,
		"emoji":             `{"customer":"😀","amount":1,"currency":"EUR"}`,
		"zero-width space":  `{"customer":"\u200b","amount":1,"currency":"EUR"}`,
		"mongolian vs":      `{"customer":"\u180e","amount":1,"currency":"EUR"}`,
		"nbsp only":         `{"customer":"\u00a0","amount":1,"currency":"EUR"}`,
		"em space only":     `{"customer":"\u2003","amount":1,"currency":"EUR"}`,
		"ideographic space": `{"customer":"\u3000 ","amount":1,"currency":"EUR"}`,
		"ogham space":       `{"customer":"\u1680","amount":1,"currency":"EUR"}`,
		"line separator":    `{"customer":"\u2028","amount":1,"currency":"EUR"}`,
		"space then name":   `{"customer":" \u3000Ada ","amount":1,"currency":"EUR"}`,
		"DEL":               `{"customer":"Ada\u007f","amount":1,"currency":"EUR"}`,
		"tab":               `{"customer":"A\tda","amount":1,"currency":"EUR"}`,
		"boolean id":        `{"id":true,"customer":"Ada","amount":1,"currency":"EUR"}`,
		"object amount":     `{"customer":"Ada","amount":{},"currency":"EUR"}`,
		"id 129":            `{"id":"` + strings.Repeat("a", maxIDLen+1) + `","customer":"Ada","amount":1,"currency":"EUR"}`,
		"id underscore":     `{"id":"_a","customer":"Ada","amount":1,"currency":"EUR"}`,
	}
	for _, b := range badOrderBodies {
		if !unjudgeable[b.name] {
			bodies[b.name] = b.body
		}
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			_, decErr := decodeOrder([]byte(body))
			v, err := decodeJSON([]byte(body))
			if err != nil {
				t.Fatalf("test body is not JSON: %v", err)
			}
			schemaErr := d.validate(schema, v, "body")
			if (decErr == nil) != (schemaErr == nil) {
				t.Fatalf("decoder: %v; schema: %v", decErr, schemaErr)
			}
		})
	}
}

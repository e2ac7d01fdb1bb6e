package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeOrderAccepts(t *testing.T) {
	tests := []struct {
		name string
		body string
		want orderRequest
	}{
		{"all fields", `{"id":"o-1","customer":"Ada","amount":1250,"currency":"EUR"}`,
			orderRequest{ID: "o-1", Customer: "Ada", Amount: 1250, Currency: "EUR"}},
		{"no id", `{"customer":"Ada","amount":1,"currency":"USD"}`,
			orderRequest{Customer: "Ada", Amount: 1, Currency: "USD"}},
		{"null id means absent", `{"id":null,"customer":"Ada","amount":1,"currency":"GBP"}`,
			orderRequest{Customer: "Ada", Amount: 1, Currency: "GBP"}},
		{"any field order and whitespace", " \n{ \"currency\" : \"CHF\", \"amount\":9223372036854775807,\"customer\":\"Zoë\"}\n\t",
			orderRequest{Customer: "Zoë", Amount: 9223372036854775807, Currency: "CHF"}},
		{"id punctuation", `{"id":"A9._:-x","customer":"c","amount":2,"currency":"JPY"}`,
			orderRequest{ID: "A9._:-x", Customer: "c", Amount: 2, Currency: "JPY"}},
		{"longest customer in characters", `{"customer":"` + strings.Repeat("é", maxCustomerLen) + `","amount":2,"currency":"JPY"}`,
			orderRequest{Customer: strings.Repeat("é", maxCustomerLen), Amount: 2, Currency: "JPY"}},
		{"longest id", `{"id":"` + strings.Repeat("a", maxIDLen) + `","customer":"c","amount":2,"currency":"JPY"}`,
			orderRequest{ID: strings.Repeat("a", maxIDLen), Customer: "c", Amount: 2, Currency: "JPY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeOrder([]byte(tt.body))
			if err != nil {
				t.Fatalf("decodeOrder: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// badOrderBodies are bodies every layer must refuse with 400; the
// integration test sends them too.
var badOrderBodies = []struct {
	name, body, wantErr string
}{
	{"empty", ``, "empty body"},
	{"whitespace only", "  \n", "empty body"},
	{"malformed", `{"customer":"Ada",`, "malformed JSON"},
	{"not json", `customer=Ada`, "malformed JSON"},
	{"array", `[{"customer":"Ada","amount":1,"currency":"EUR"}]`, "JSON object"},
	{"string", `"hello"`, "JSON object"},
	{"null", `null`, "JSON object"},
	{"unknown field", `{"customer":"Ada","amount":1,"currency":"EUR","vip":true}`, `unknown field "vip"`},
	{"field in other case", `{"Customer":"Ada","amount":1,"currency":"EUR"}`, `unknown field "Customer"`},
	{"duplicate field", `{"customer":"Ada","amount":1,"amount":2,"currency":"EUR"}`, `duplicate field "amount"`},
	{"missing customer", `{"amount":1,"currency":"EUR"}`, `missing field "customer"`},
	{"missing amount", `{"customer":"Ada","currency":"EUR"}`, `missing field "amount"`},
	{"missing currency", `{"customer":"Ada","amount":1}`, `missing field "currency"`},
	{"null customer", `{"customer":null,"amount":1,"currency":"EUR"}`, `missing field "customer"`},
	{"null amount", `{"customer":"Ada","amount":null,"currency":"EUR"}`, `missing field "amount"`},
	{"customer number", `{"customer":5,"amount":1,"currency":"EUR"}`, `"customer" must be a string`},
	{"customer blank", `{"customer":"  ","amount":1,"currency":"EUR"}`, `must not be blank`},
	{"customer NUL", `{"customer":"A\u0000da","amount":1,"currency":"EUR"}`, `control characters`},
	{"customer too long", `{"customer":"` + strings.Repeat("x", maxCustomerLen+1) + `","amount":1,"currency":"EUR"}`, `at most`},
	{"customer too many characters", `{"customer":"` + strings.Repeat("é", maxCustomerLen+1) + `","amount":1,"currency":"EUR"}`, `at most`},
	{"customer C1 control", `{"customer":"Ada\u0085","amount":1,"currency":"EUR"}`, `control characters`},
	{"amount string", `{"customer":"Ada","amount":"10","currency":"EUR"}`, `"amount" must be an integer`},
	{"amount bool", `{"customer":"Ada","amount":true,"currency":"EUR"}`, `"amount" must be an integer`},
	{"amount fraction", `{"customer":"Ada","amount":10.5,"currency":"EUR"}`, `"amount" must be an integer`},
	{"amount integral fraction", `{"customer":"Ada","amount":10.0,"currency":"EUR"}`, `"amount" must be an integer`},
	{"amount exponent", `{"customer":"Ada","amount":1e3,"currency":"EUR"}`, `"amount" must be an integer`},
	{"amount zero", `{"customer":"Ada","amount":0,"currency":"EUR"}`, `greater than 0`},
	{"amount negative", `{"customer":"Ada","amount":-5,"currency":"EUR"}`, `greater than 0`},
	{"amount overflow", `{"customer":"Ada","amount":9223372036854775808,"currency":"EUR"}`, `out of range`},
	{"currency unknown", `{"customer":"Ada","amount":1,"currency":"XYZ"}`, `"currency" must be one of`},
	{"currency lower case", `{"customer":"Ada","amount":1,"currency":"eur"}`, `"currency" must be one of`},
	{"currency number", `{"customer":"Ada","amount":1,"currency":978}`, `"currency" must be a string`},
	{"empty id", `{"id":"","customer":"Ada","amount":1,"currency":"EUR"}`, `"id" must be`},
	{"id with slash", `{"id":"a/b","customer":"Ada","amount":1,"currency":"EUR"}`, `"id" must be`},
	{"id starting with dot", `{"id":"..","customer":"Ada","amount":1,"currency":"EUR"}`, `"id" must be`},
	{"id too long", `{"id":"` + strings.Repeat("a", maxIDLen+1) + `","customer":"Ada","amount":1,"currency":"EUR"}`, `"id" must be`},
	{"id number", `{"id":7,"customer":"Ada","amount":1,"currency":"EUR"}`, `"id" must be a string`},
	{"trailing object", `{"customer":"Ada","amount":1,"currency":"EUR"}{}`, "after the JSON object"},
	{"trailing garbage", `{"customer":"Ada","amount":1,"currency":"EUR"} x`, "after the JSON object"},
	{"trailing brace", `{"customer":"Ada","amount":1,"currency":"EUR"}}`, "after the JSON object"},
}

func TestDecodeOrderRefuses(t *testing.T) {
	for _, tt := range badOrderBodies {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeOrder([]byte(tt.body))
			in, ok := errors.AsType[*inputError](err)
			if !ok {
				t.Fatalf("err = %v, want an *inputError", err)
			}
			if in.status != http.StatusBadRequest {
				t.Errorf("status = %d, want 400", in.status)
			}
			if !strings.Contains(in.msg, tt.wantErr) {
				t.Errorf("message %q does not contain %q", in.msg, tt.wantErr)
			}
		})
	}
}

func TestUnknownFieldNameIsClipped(t *testing.T) {
	long := strings.Repeat("k", 10_000)
	_, err := decodeOrder([]byte(`{"` + long + `":1}`))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("err = %.300v, want a short error", err)
	}
}

func TestCheckContentType(t *testing.T) {
	tests := []struct {
		header string
		ok     bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON; charset=UTF-8", true},
		{"", false},
		{"text/plain", false},
		{"application/x-www-form-urlencoded", false},
		{"application/json; charset=latin1", false},
		{"application/jsonx", false},
		{"application/json;;;=", false},
	}
	for _, tt := range tests {
		err := checkContentType(tt.header)
		if (err == nil) != tt.ok {
			t.Errorf("checkContentType(%q) = %v, want ok=%v", tt.header, err, tt.ok)
		}
		if err != nil {
			if in, _ := errors.AsType[*inputError](err); in == nil || in.status != http.StatusUnsupportedMediaType {
				t.Errorf("checkContentType(%q) = %v, want a 415 input error", tt.header, err)
			}
		}
	}
}

func TestCheckIdempotencyKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"k", true},
		{"9f0c2a3e-retry_1:+/=", true},
		{strings.Repeat("k", maxKeyLen), true},
		{"", false},
		{strings.Repeat("k", maxKeyLen+1), false},
		{"has space", false},
		{"tab\t", false},
		{"ünïcode", false},
	}
	for _, tt := range tests {
		if err := checkIdempotencyKey(tt.key); (err == nil) != tt.ok {
			t.Errorf("checkIdempotencyKey(%.20q) = %v, want ok=%v", tt.key, err, tt.ok)
		}
	}
}

func TestHashIgnoresFormattingNotContent(t *testing.T) {
	a, errA := decodeOrder([]byte(`{"customer":"Ada","amount":1,"currency":"EUR"}`))
	b, errB := decodeOrder([]byte(` { "currency":"EUR", "amount":1, "customer":"Ada" } `))
	c, errC := decodeOrder([]byte(`{"customer":"Ada","amount":2,"currency":"EUR"}`))
	d, errD := decodeOrder([]byte(`{"id":"x","customer":"Ada","amount":1,"currency":"EUR"}`))
	if err := errors.Join(errA, errB, errC, errD); err != nil {
		t.Fatal(err)
	}
	if a.hash() != b.hash() {
		t.Error("same order, different formatting: hashes differ")
	}
	if a.hash() == c.hash() || a.hash() == d.hash() {
		t.Error("different orders share a hash")
	}
}

// FuzzDecodeOrder: the decoder never panics, errors are always client errors
// with a 400 and a short message, and what it accepts is valid, matches the
// OpenAPI NewOrder schema and survives a round trip through JSON unchanged.
func FuzzDecodeOrder(f *testing.F) {
	f.Add([]byte(`{"id":"o-1","customer":"Ada","amount":1250,"currency":"EUR"}`))
	f.Add([]byte(`{"customer":"Ada","amount":1,"currency":"USD"}`))
	f.Add([]byte(`{"id":null,"customer":"Ada","amount":1,"currency":"GBP"} `))
	for _, b := range badOrderBodies {
		f.Add([]byte(b.body))
	}
	doc := loadOpenAPI(f)
	newOrderSchema := map[string]any{"$ref": "#/components/schemas/NewOrder"}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeOrder(body)
		if err != nil {
			in, ok := errors.AsType[*inputError](err)
			if !ok || in.status != http.StatusBadRequest || in.msg == "" {
				t.Fatalf("err = %#v, want a 400 input error", err)
			}
			return
		}
		if got.Amount <= 0 || !knownCurrency(got.Currency) || strings.TrimSpace(got.Customer) == "" ||
			utf8.RuneCountInString(got.Customer) > maxCustomerLen || (got.ID != "" && !validID(got.ID)) {
			t.Fatalf("accepted an invalid order %+v from %q", got, body)
		}
		// What the decoder accepts, the published schema accepts too.
		if v, err := decodeJSON(body); err != nil || doc.validate(newOrderSchema, v, "body") != nil {
			t.Fatalf("decoder accepted %q, the OpenAPI schema refuses it: %v", body, doc.validate(newOrderSchema, v, "body"))
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == "" { // the encoder writes "id":"", which the decoder refuses
			again, _ = json.Marshal(struct {
				Customer string `json:"customer"`
				Amount   int64  `json:"amount"`
				Currency string `json:"currency"`
			}{got.Customer, got.Amount, got.Currency})
		}
		back, err := decodeOrder(again)
		if err != nil || back != got {
			t.Fatalf("round trip of %+v: got %+v, %v", got, back, err)
		}
	})
}

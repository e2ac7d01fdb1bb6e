package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on the fields of POST /orders.
const (
	maxIDLen       = 128
	maxCustomerLen = 256 // characters (code points), as JSON Schema counts
	maxKeyLen      = 255 // Idempotency-Key
)

// orderRequest is a validated POST /orders body. Amount is in the currency's
// minor unit (cents).
type orderRequest struct {
	ID       string `json:"id"` // empty when the client leaves it to the server
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// inputError is the client's mistake; its text is safe to send back.
type inputError struct {
	status int
	msg    string
}

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// checkContentType accepts application/json, with no charset or UTF-8.
func checkContentType(header string) error {
	unsupported := &inputError{status: http.StatusUnsupportedMediaType, msg: "Content-Type must be application/json"}
	if header == "" {
		return unsupported
	}
	mt, params, err := mime.ParseMediaType(header)
	if err != nil || mt != "application/json" {
		return unsupported
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return unsupported
	}
	return nil
}

// checkIdempotencyKey accepts 1 to 255 visible ASCII characters.
func checkIdempotencyKey(key string) error {
	if key == "" || len(key) > maxKeyLen {
		return badInput("Idempotency-Key must be 1 to %d characters", maxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return badInput("Idempotency-Key must be visible ASCII characters")
		}
	}
	return nil
}

// decodeOrder parses and validates a POST /orders body: exactly one JSON
// object with the fields id (optional), customer, amount and currency, each
// once, spelled exactly, and nothing after it. Every error is an *inputError.
// It is a pure function so that it can be fuzzed.
func decodeOrder(body []byte) (orderRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := expectDelim(dec, '{'); err != nil {
		return orderRequest{}, err
	}
	var (
		req  orderRequest
		seen = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return orderRequest{}, malformed(err)
		}
		name, _ := tok.(string) // object keys are always strings
		if seen[name] {
			return orderRequest{}, badInput("duplicate field %q", clip(name))
		}
		seen[name] = true
		if err := decodeField(dec, name, &req); err != nil {
			return orderRequest{}, err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return orderRequest{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return orderRequest{}, badInput("unexpected data after the JSON object")
	}
	for _, f := range []string{"customer", "amount", "currency"} {
		if !seen[f] {
			return orderRequest{}, badInput("missing field %q", f)
		}
	}
	return req, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return badInput("empty body: want a JSON object")
	}
	if err != nil {
		return malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return badInput("body must be a JSON object")
	}
	return nil
}

// decodeField decodes the value of field name into req and validates it.
func decodeField(dec *json.Decoder, name string, req *orderRequest) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return malformed(err)
	}
	switch name {
	case "id":
		return decodeID(raw, &req.ID)
	case "customer":
		return decodeCustomer(raw, &req.Customer)
	case "amount":
		return decodeAmount(raw, &req.Amount)
	case "currency":
		return decodeCurrency(raw, &req.Currency)
	default:
		return badInput("unknown field %q", clip(name))
	}
}

func decodeString(raw json.RawMessage, name string) (string, error) {
	if string(raw) == "null" {
		return "", badInput("missing field %q", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badInput("field %q must be a string", name)
	}
	return s, nil
}

// decodeID accepts 1 to 128 of [A-Za-z0-9._:-], starting with a letter or
// digit, so that the id is one clean URL path segment. null means absent.
func decodeID(raw json.RawMessage, dst *string) error {
	if string(raw) == "null" {
		return nil
	}
	s, err := decodeString(raw, "id")
	if err != nil {
		return err
	}
	if !validID(s) {
		return badInput("field \"id\" must be 1 to %d of A-Z a-z 0-9 . _ : - starting with a letter or digit", maxIDLen)
	}
	*dst = s
	return nil
}

func validID(s string) bool {
	if s == "" || len(s) > maxIDLen || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func decodeCustomer(raw json.RawMessage, dst *string) error {
	s, err := decodeString(raw, "customer")
	if err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(s) == "":
		return badInput("field \"customer\" must not be blank")
	case utf8.RuneCountInString(s) > maxCustomerLen:
		return badInput("field \"customer\" must be at most %d characters", maxCustomerLen)
	case !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0:
		// PostgreSQL text cannot hold NUL; other control characters are
		// refused too so that names print cleanly.
		return badInput("field \"customer\" must not contain control characters")
	}
	*dst = s
	return nil
}

// decodeAmount accepts a JSON integer literal (no fraction, no exponent) in
// 1..2^63-1.
func decodeAmount(raw json.RawMessage, dst *int64) error {
	s := string(raw)
	if s == "null" {
		return badInput("missing field %q", "amount")
	}
	if strings.ContainsAny(s, ".eE") || !isNumberStart(s) {
		return badInput("field \"amount\" must be an integer (minor units, e.g. cents)")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return badInput("field \"amount\" is out of range")
	}
	if n <= 0 {
		return badInput("field \"amount\" must be greater than 0")
	}
	*dst = n
	return nil
}

func isNumberStart(s string) bool {
	return s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9')
}

func decodeCurrency(raw json.RawMessage, dst *string) error {
	s, err := decodeString(raw, "currency")
	if err != nil {
		return err
	}
	if !knownCurrency(s) {
		return badInput("field \"currency\" must be one of %s", strings.Join(Currencies(), ", "))
	}
	*dst = s
	return nil
}

func malformed(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return badInput("malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return badInput("malformed JSON: unexpected end of input")
	}
	return badInput("malformed JSON")
}

// clip shortens client text echoed in an error.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// hash identifies a request for the idempotency check: the same key must come
// with the same validated order (formatting and field order do not matter).
func (r orderRequest) hash() string {
	b, _ := json.Marshal(r) // cannot fail: strings and an int
	sum := sha256.Sum256(append([]byte("POST /orders\n"), b...))
	return hex.EncodeToString(sum[:])
}

package outbox

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var compactCases = []string{
	``,
	`{}`,
	`{"a": 1, "b": [1, 2, {"c": null}]}`,
	"{\n\t\"a\" :\r\n true }",
	`{"s": "x y\tz", "t": "quote \" inside", "u": "slash \\", "v": "\\\" both"}`,
	`{"end": "\\\\"}`,
	`["a", "b" ,"c"]`,
	`"just a string with  spaces"`,
	`  42  `,
	`{"unicode": "héllo \u00e9 ✓", "n": -1.5e+10}`,
	`{"k": "a\"b\"c", "l": ["\"", "\\", "\\\""]}`,
}

func TestAppendCompactCheckedMatchesCompact(t *testing.T) {
	for _, in := range compactCases {
		if in != "" && !json.Valid([]byte(in)) {
			t.Fatalf("test case %q is not JSON", in)
		}
		var want bytes.Buffer
		_ = json.Compact(&want, []byte(in))
		if got, err := appendCompactChecked(nil, []byte(in)); err != nil || string(got) != want.String() {
			t.Errorf("compact %q = %q, want %q", in, got, want.String())
		}
	}
}

func TestAppendCompactCheckedAppends(t *testing.T) {
	got, err := appendCompactChecked([]byte("prefix:"), []byte(`{"a": 1}`))
	if err != nil || string(got) != `prefix:{"a":1}` {
		t.Fatalf("got %q", got)
	}
}

func TestCheckedJSON(t *testing.T) {
	for typ, want := range map[string]bool{"json": true, "jsonb": true, "text": false, "bytea": false, "": false, "xml": false} {
		if got := CheckedJSON(typ); got != want {
			t.Errorf("CheckedJSON(%q) = %v, want %v", typ, got, want)
		}
	}
}

// Nesting beyond encoding/json's limit is refused on the fast path too:
// PostgreSQL accepts it, a Go consumer could not decode it.
func TestAppendCompactCheckedDepth(t *testing.T) {
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{maxJSONDepth, true}, {maxJSONDepth + 1, false}} {
		in := strings.Repeat("[", tc.depth) + strings.Repeat("]", tc.depth)
		_, err := appendCompactChecked(nil, []byte(in))
		werr := json.Compact(&bytes.Buffer{}, []byte(in))
		if (err == nil) != tc.ok || (werr == nil) != tc.ok {
			t.Fatalf("depth %d: error %v (json.Compact: %v), want ok=%v", tc.depth, err, werr, tc.ok)
		}
		if !tc.ok && !strings.Contains(err.Error(), "exceeded max depth") {
			t.Fatalf("error %q", err)
		}
	}
}

// A checked payload is compacted without validation, an unchecked one
// (a domain over some other type) still is: invalid JSON is refused.
func TestBuildValidatesOnlyUncheckedJSON(t *testing.T) {
	e := &Event{AggregateType: "orders", AggregateID: "1", Payload: []byte(`{"a": [1, 2]}`), JSONChecked: true}
	var r Record
	if err := NewBuilder("").Build(&r, e); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Msg.Value.Encode(); string(v) != `{"a":[1,2]}` {
		t.Fatalf("value = %q", v)
	}
	e.JSONChecked, e.Payload = false, []byte(`{"a":`)
	if err := NewBuilder("").Build(&r, e); err == nil {
		t.Fatal("invalid unchecked JSON accepted")
	}
}

// FuzzAppendCompactChecked: on valid JSON the fast path equals
// json.Compact; on anything else it must not panic.
func FuzzAppendCompactChecked(f *testing.F) {
	for _, c := range compactCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"a": "unterminated \`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := appendCompactChecked(nil, in)
		if !json.Valid(in) {
			return
		}
		var want bytes.Buffer
		if werr := json.Compact(&want, in); werr != nil || err != nil {
			t.Fatalf("compact %q: %v, json.Compact: %v", in, err, werr)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("compact %q = %q, want %q", in, got, want.Bytes())
		}
	})
}

func BenchmarkCompactPayload(b *testing.B) {
	payload := []byte(`{"order_id": "5d7c5b8e-4f0b-4a57-9a3d-2b1f0c9e8a7d", "customer": "c-1042", "total_cents": 12999, "currency": "EUR", "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "note": "leave at the \"back\" door"}`)
	dst := make([]byte, 0, len(payload))
	b.Run("json.Compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := bytes.NewBuffer(dst[:0])
			_ = json.Compact(buf, payload)
		}
	})
	b.Run("checked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = appendCompactChecked(dst[:0], payload)
		}
	})
}

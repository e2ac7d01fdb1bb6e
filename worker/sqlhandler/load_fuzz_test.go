package sqlhandler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker"
)

// hostileYAML are handlers files an operator (or an attacker with write
// access to the file) could hand the worker: alias bombs, deep nesting,
// tags, overflowing numbers, several documents, bytes that are not UTF-8.
var hostileYAML = []string{
	"handlers:\n  order.created:\n    sql: UPDATE orders SET status = 'processed' WHERE id = $1\n",
	"unknown: dlq\nhandlers:\n  a:\n    sql: SELECT $1, $2, $3, $4, $5\n    expect_rows: 0\n    batch_sql: SELECT 1\n",
	"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\nhandlers: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
	"handlers:\n  a: &h {sql: SELECT 1}\n  b: *h\n  c: {<<: *h, expect_rows: 2}\n",
	"handlers:\n  a:\n    sql: SELECT 1\n    expect_rows: 99999999999999999999999\n",
	"handlers:\n  a:\n    sql: SELECT 1\n    expect_rows: -1\n",
	"handlers:\n  a:\n    sql: !!binary U0VMRUNUIDE=\n",
	"handlers:\n  a:\n    sql: SELECT 1\n  a:\n    sql: SELECT 2\n",
	"handlers:\n  a: {sql: SELECT 1}\n---\nhandlers:\n  b: {sql: SELECT 2}\n",
	"\ufeffhandlers:\n  \"\\0\\x01\": {sql: \"SELECT '\\0'\"}\n",
	"handlers:\n  \xff\xfe: {sql: SELECT 1}\n",
	"handlers:\n  ? [a, b]\n  : {sql: SELECT 1}\n",
	"handlers:\n\t a: {sql: SELECT 1}\n",
	"handlers: {a: {sql: SELECT 1, extra: 1}}\n",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("- ", 5000) + "x\n",
	"",
	"~",
	"handlers: ~\n",
}

// FuzzLoadHandlers loads any bytes as a handlers file. Load must never
// panic or hang; what it accepts must be valid, parse again to the same
// spec, and give parameters for any event.
func FuzzLoadHandlers(f *testing.F) {
	for _, s := range hostileYAML {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "handlers.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Load(path)
		if err != nil {
			if s != nil {
				t.Fatal("a spec with an error")
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Load accepted an invalid spec: %v", err)
		}
		again, err := Parse(data)
		if err != nil || len(again.Handlers) != len(s.Handlers) || again.Unknown != s.Unknown {
			t.Fatalf("the same bytes parse differently: %v", err)
		}
		for _, typ := range s.EventTypes() {
			a, b := s.Handlers[typ], again.Handlers[typ]
			if a.SQL != b.SQL || a.BatchSQL != b.BatchSQL || a.MinRows() != b.MinRows() {
				t.Fatalf("handler %q parses differently: %+v vs %+v", typ, a, b)
			}
		}
	})
}

// TestHostileHandlersFiles pins which hostile files load.
func TestHostileHandlersFiles(t *testing.T) {
	loads := map[int]bool{0: true, 1: true, 3: true, 6: true, 9: true}
	for i, s := range hostileYAML {
		_, err := Parse([]byte(s))
		if (err == nil) != loads[i] {
			t.Errorf("file %d %q: err %v, want loaded %v", i, truncate(s), err, loads[i])
		}
	}
}

// FuzzParams builds the statement parameters of any event: never a panic,
// and a failure is permanent (dead-letter at once, no retries).
func FuzzParams(f *testing.F) {
	f.Add("o-1", []byte(`{"a":1}`), "order.created", "traceparent", "00-abc-def-01")
	f.Add("k\x00\xff", []byte(`"\ud800"`), "", "\xff", "\x00\x01")
	f.Fuzz(func(t *testing.T, aggID string, payload []byte, evType, hk, hv string) {
		ev := worker.Event{Event: outbox.Event{ID: uuid.New(), AggregateID: aggID, EventType: evType, Payload: payload,
			Headers: map[string]string{hk: hv}}}
		args, err := params(&ev)
		if err != nil {
			if !worker.IsPermanent(err) {
				t.Fatalf("params error %v is not permanent", err)
			}
			return
		}
		if len(args) != len(paramOIDs) || string(args[0]) != aggID || string(args[3]) != evType {
			t.Fatalf("params %q", args)
		}
	})
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

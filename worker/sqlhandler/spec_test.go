package sqlhandler

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string // empty: valid
		check   func(t *testing.T, s *Spec)
	}{
		{name: "contract example", yaml: `
unknown: skip
handlers:
  order.created:
    sql: UPDATE orders SET status = 'processed', updated_at = now() WHERE id = $1
    expect_rows: 1
`, check: func(t *testing.T, s *Spec) {
			if s.Unknown != UnknownSkip || s.Handlers["order.created"].MinRows() != 1 {
				t.Errorf("spec = %+v", s)
			}
		}},
		{name: "defaults", yaml: "handlers:\n  a:\n    sql: SELECT 1\n", check: func(t *testing.T, s *Spec) {
			if s.Unknown != UnknownSkip || s.Handlers["a"].MinRows() != 1 {
				t.Errorf("spec = %+v", s)
			}
		}},
		{name: "expect_rows 0 and dlq", yaml: "unknown: dlq\nhandlers:\n  a:\n    sql: SELECT 1\n    expect_rows: 0\n", check: func(t *testing.T, s *Spec) {
			if s.Unknown != UnknownDLQ || s.Handlers["a"].MinRows() != 0 {
				t.Errorf("spec = %+v", s)
			}
		}},
		{name: "empty file", yaml: "", wantErr: "empty handlers file"},
		{name: "not YAML", yaml: "handlers: [", wantErr: "parse YAML"},
		{name: "unknown top-level key", yaml: "handler:\n  a:\n    sql: SELECT 1\n", wantErr: "field handler not found"},
		{name: "unknown statement key", yaml: "handlers:\n  a:\n    sql: SELECT 1\n    expect_row: 2\n", wantErr: "field expect_row not found"},
		{name: "duplicate event type", yaml: "handlers:\n  a:\n    sql: SELECT 1\n  a:\n    sql: SELECT 2\n", wantErr: "already defined"},
		{name: "bad unknown policy", yaml: "unknown: ignore\nhandlers:\n  a:\n    sql: SELECT 1\n", wantErr: `unknown: "ignore"`},
		{name: "no handlers", yaml: "unknown: skip\n", wantErr: "no handlers"},
		{name: "no sql", yaml: "handlers:\n  order.created:\n    expect_rows: 1\n", wantErr: `handler "order.created": no sql`},
		{name: "negative expect_rows", yaml: "handlers:\n  order.created:\n    sql: SELECT 1\n    expect_rows: -1\n", wantErr: `handler "order.created": expect_rows -1`},
		{name: "expect_rows not a number", yaml: "handlers:\n  a:\n    sql: SELECT 1\n    expect_rows: many\n", wantErr: "parse YAML"},
		{name: "two documents", yaml: "handlers:\n  a:\n    sql: SELECT 1\n---\nhandlers: {}\n", wantErr: "more than one document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, s)
		})
	}
}

// TestBundledOrdersFile keeps deploy/handlers/orders.yaml the contract's
// demo handler.
func TestBundledOrdersFile(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "handlers", "orders.yaml")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := s.Handlers["order.created"]
	if !ok || st.MinRows() != 1 || !strings.Contains(st.SQL, "status = 'processed'") || !strings.Contains(st.SQL, "id = $1") {
		t.Errorf("orders.yaml = %+v", s)
	}
}

func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.yaml")
	if err := os.WriteFile(path, []byte("handlers: {a: {sql: ''}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load error %v does not name the file", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file loaded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("unknown: skip\nhandlers:\n  a:\n    sql: SELECT $1\n    expect_rows: 1\n"))
	f.Add([]byte("handlers: {a: {sql: x, expect_rows: 0}}"))
	f.Add([]byte("- 1\n- 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if s.Unknown != UnknownSkip && s.Unknown != UnknownDLQ {
			t.Fatalf("accepted unknown %q", s.Unknown)
		}
		if len(s.Handlers) == 0 {
			t.Fatal("accepted a file without handlers")
		}
		for typ, st := range s.Handlers {
			if strings.TrimSpace(typ) == "" || strings.TrimSpace(st.SQL) == "" || st.MinRows() < 0 {
				t.Fatalf("accepted handler %q: %+v", typ, st)
			}
		}
	})
}

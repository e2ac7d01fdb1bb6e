package prune

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"defaults", Config{OlderThan: time.Hour}, ""},
		{"no age", Config{}, "--older-than"},
		{"negative age", Config{OlderThan: -time.Hour}, "--older-than"},
		{"batch too large", Config{OlderThan: time.Hour, BatchSize: MaxBatchSize + 1}, "--batch-size"},
		{"batch negative", Config{OlderThan: time.Hour, BatchSize: -1}, "--batch-size"},
		{"negative wait", Config{OlderThan: time.Hour, RelayWait: -time.Second}, "--relay-wait"},
		{"schema.table", Config{OlderThan: time.Hour, OutboxTable: "app.outbox"}, ""},
		{"three parts", Config{OlderThan: time.Hour, OutboxTable: "a.b.c"}, "invalid outbox table"},
		{"empty part", Config{OlderThan: time.Hour, OutboxTable: "app."}, "invalid outbox table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTableIdentQuotes(t *testing.T) {
	for in, want := range map[string]string{
		"outbox":        `"outbox"`,
		"public.outbox": `"public"."outbox"`,
		`we"ird.t`:      `"we""ird"."t"`,
	} {
		if got, err := tableIdent(in); err != nil || got != want {
			t.Errorf("tableIdent(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// FuzzTableIdent: a name is refused, or quoted so that unquoting gives back
// exactly its parts (no way to break out of the identifier).
func FuzzTableIdent(f *testing.F) {
	for _, s := range []string{"outbox", "public.outbox", `a"b.c`, "a.b.c", ".", "", "x;DROP TABLE y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := tableIdent(name)
		if err != nil {
			return
		}
		var parts []string
		rest := got
		for rest != "" {
			if rest[0] != '"' {
				t.Fatalf("%q -> %q: part does not start with a quote", name, got)
			}
			i, part := 1, ""
			for {
				j := strings.IndexByte(rest[i:], '"')
				if j < 0 {
					t.Fatalf("%q -> %q: unterminated identifier", name, got)
				}
				part += rest[i : i+j]
				i += j + 1
				if i < len(rest) && rest[i] == '"' { // doubled quote
					part += `"`
					i++
					continue
				}
				break
			}
			parts = append(parts, part)
			rest = rest[i:]
			if rest != "" {
				if rest[0] != '.' {
					t.Fatalf("%q -> %q: parts not separated by a dot", name, got)
				}
				rest = rest[1:]
			}
		}
		// Sanitize drops NUL bytes, which PostgreSQL identifiers cannot hold.
		if want := strings.ReplaceAll(name, "\x00", ""); strings.Join(parts, ".") != want {
			t.Fatalf("%q -> %q unquotes to %q", name, got, strings.Join(parts, "."))
		}
	})
}

package chaos

import (
	"testing"

	"github.com/google/uuid"
)

func TestCheck(t *testing.T) {
	a, b, c, d, rb := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	writes := []Write{
		{ID: a, Key: "k1", Outcome: Committed},
		{ID: rb, Key: "k1", Outcome: RolledBack},
		{ID: b, Key: "k1", Outcome: Committed},
		{ID: c, Key: "k2", Outcome: Committed},
		{ID: d, Key: "k2", Outcome: Committed},
	}
	rec := func(id uuid.UUID, key string) Record { return Record{ID: id, Key: key} }
	once := map[uuid.UUID]int{a: 1, b: 1, c: 1, d: 1}
	tests := []struct {
		name    string
		records []Record
		applied map[uuid.UUID]int
		want    Result
	}{
		{"clean", []Record{rec(a, "k1"), rec(c, "k2"), rec(b, "k1"), rec(d, "k2")}, once,
			Result{}},
		{"duplicates after a replay are allowed", []Record{rec(a, "k1"), rec(b, "k1"), rec(a, "k1"), rec(b, "k1"), rec(c, "k2"), rec(d, "k2")}, once,
			Result{Duplicates: 2}},
		{"lost", []Record{rec(a, "k1"), rec(c, "k2"), rec(d, "k2")}, once,
			Result{Lost: 1}},
		{"phantom", []Record{rec(a, "k1"), rec(rb, "k1"), rec(b, "k1"), rec(c, "k2"), rec(d, "k2")}, once,
			Result{Phantom: 1}},
		{"first occurrences out of order", []Record{rec(b, "k1"), rec(a, "k1"), rec(c, "k2"), rec(d, "k2")}, once,
			Result{OrderViolations: 1}},
		{"a later duplicate does not reorder", []Record{rec(a, "k1"), rec(b, "k1"), rec(a, "k1"), rec(c, "k2"), rec(d, "k2")}, once,
			Result{Duplicates: 1}},
		{"double applied and unapplied", []Record{rec(a, "k1"), rec(b, "k1"), rec(c, "k2"), rec(d, "k2")}, map[uuid.UUID]int{a: 2, b: 1, c: 1},
			Result{DoubleApplied: 1, Unapplied: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(writes, tt.records, tt.applied)
			if got.Committed != 4 || got.RolledBack != 1 || got.Records != len(tt.records) {
				t.Fatalf("counted %d committed, %d rolled back, %d records", got.Committed, got.RolledBack, got.Records)
			}
			if got.Lost != tt.want.Lost || got.Phantom != tt.want.Phantom || got.OrderViolations != tt.want.OrderViolations ||
				got.DoubleApplied != tt.want.DoubleApplied || got.Unapplied != tt.want.Unapplied || got.Duplicates != tt.want.Duplicates {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if (got.Violations() == 0) != (len(got.Examples) == 0) {
				t.Fatalf("examples %v do not match %d violations", got.Examples, got.Violations())
			}
		})
	}
}

// TestDuplicatesViolateExactlyOnce: duplicates are allowed at-least-once and
// a violation in exactly-once mode.
func TestDuplicatesViolateExactlyOnce(t *testing.T) {
	a := uuid.New()
	writes := []Write{{ID: a, Key: "k", Outcome: Committed}}
	got := Check(writes, []Record{{ID: a, Key: "k"}, {ID: a, Key: "k"}}, map[uuid.UUID]int{a: 1})
	if got.Duplicates != 1 || got.Violations() != 0 {
		t.Fatalf("at-least-once: %+v, %d violations", got, got.Violations())
	}
	got.ExactlyOnce = true
	if got.Violations() != 1 {
		t.Fatalf("exactly-once: %d violations, want the duplicate", got.Violations())
	}
}

package console

import (
	"reflect"
	"testing"
)

func TestCardsOf(t *testing.T) {
	rec := func(off int64) record { return record{Partition: 2, Offset: off} }
	cases := []struct {
		name                          string
		f                             Facts
		order, outbox, effect, offset string
	}{
		{"nothing yet", Facts{OrderID: "o", Committed: -1}, "not-created", "not-written", "effects-0", "not-published"},
		{"committed rows, not in Kafka", Facts{OrderID: "o", Status: "created", EventID: "e", Committed: -1}, "created", "written", "effects-0", "not-published"},
		{"in Kafka, no group offset", Facts{OrderID: "o", Status: "created", EventID: "e", Records: []record{rec(5)}, Committed: -1}, "created", "written", "effects-0", "not-committed"},
		{"offset at the record is not past it", Facts{OrderID: "o", Status: "processed", EventID: "e", Effects: 1, InboxRows: 1, Records: []record{rec(5)}, Committed: 5}, "processed", "written", "effects-1", "not-committed"},
		{"offset past the record", Facts{OrderID: "o", Status: "processed", EventID: "e", Effects: 1, InboxRows: 1, Records: []record{rec(5)}, Committed: 6}, "processed", "written", "effects-1", "committed"},
		{"a duplicate: the last copy decides", Facts{OrderID: "o", Status: "processed", EventID: "e", Effects: 1, Records: []record{rec(5), rec(7)}, Committed: 6}, "processed", "written", "effects-1", "not-committed"},
		{"read-only: changes not counted", Facts{OrderID: "o", Status: "processed", EventID: "e", Effects: -1, InboxRows: 1, Committed: -1}, "processed", "written", "inbox-1", "not-published"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := cardsOf(c.f)
			want := []string{c.order, c.outbox, c.effect, c.offset}
			if have := []string{got.Order.State, got.Outbox.State, got.Effect.State, got.Offset.State}; !reflect.DeepEqual(have, want) {
				t.Fatalf("states %v, want %v", have, want)
			}
		})
	}
}

func TestEffectCardWords(t *testing.T) {
	for n, want := range map[int]string{0: "0 changes", 1: "1 change", 2: "2 changes"} {
		if got := effectCard(Facts{Effects: n}).Label; got != want {
			t.Errorf("%d effects: label %q, want %q", n, got, want)
		}
	}
}

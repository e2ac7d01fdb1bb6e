package sqlhandler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker"
)

func TestPlan(t *testing.T) {
	h := &Handler{unknown: UnknownSkip, types: map[string]*compiled{
		"set":    {typ: "set", batchName: "b"},
		"single": {typ: "single"},
	}}
	ev := func(typ, agg string) worker.Event {
		return worker.Event{Event: outbox.Event{ID: uuid.New(), EventType: typ, AggregateID: agg}}
	}
	tests := []struct {
		name    string
		evs     []worker.Event
		want    string // the calls, each as its event indexes
		skipped string
	}{
		{"one set", []worker.Event{ev("set", "a"), ev("set", "b"), ev("set", "c")}, "[0 1 2]", "[]"},
		{"repeat starts a set", []worker.Event{ev("set", "a"), ev("set", "b"), ev("set", "a"), ev("set", "c")}, "[0 1] [2 3]", "[]"},
		{"single types one by one", []worker.Event{ev("single", "a"), ev("single", "b")}, "[0] [1]", "[]"},
		{"another type closes the set", []worker.Event{ev("set", "a"), ev("single", "x"), ev("set", "b")}, "[0] [1] [2]", "[]"},
		{"unknown types are skipped, not a break", []worker.Event{ev("set", "a"), ev("other", "a"), ev("set", "b")}, "[0 2]", "[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skipped := make([]bool, len(tt.evs))
			calls, err := h.plan(tt.evs, skipped)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range calls {
				got = append(got, fmt.Sprint(k.idx))
			}
			var sk []int
			for i, s := range skipped {
				if s {
					sk = append(sk, i)
				}
			}
			if strings.Join(got, " ") != tt.want || fmt.Sprint(sk) != tt.skipped {
				t.Errorf("calls %v skipped %v, want %s and %s", got, sk, tt.want, tt.skipped)
			}
		})
	}
	h.unknown = UnknownDLQ
	if _, err := h.plan([]worker.Event{ev("other", "a")}, make([]bool, 1)); !worker.IsPermanent(err) {
		t.Errorf("unknown type under dlq: %v, want a permanent error", err)
	}
}

func TestArrayParams(t *testing.T) {
	id := uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	evs := []worker.Event{
		{Event: outbox.Event{ID: id, AggregateID: `a"b\c`, EventType: "t", Payload: []byte(`{"s":"x\"y"}`)}},
		{Event: outbox.Event{ID: id, AggregateID: "d,{e}", EventType: "t", Payload: []byte(`{}`), Headers: map[string]string{"k": "v"}}},
	}
	got, err := arrayParams(evs, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"a\"b\\c","d,{e}"}`,
		`{"{\"s\":\"x\\\"y\"}","{}"}`,
		`{"` + id.String() + `","` + id.String() + `"}`,
		`{"t","t"}`,
		`{"{}","{\"k\":\"v\"}"}`,
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("$%d = %s, want %s", i+1, got[i], want[i])
		}
	}
}

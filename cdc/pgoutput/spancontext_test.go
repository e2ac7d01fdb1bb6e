package pgoutput

import (
	"testing"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// TestDebeziumSpanContextColumn: with the debezium preset, the
// tracingspancontext column (Java properties text, as Debezium stores it)
// becomes the event's traceparent and tracestate, and is not a header of
// its own; a table without the column still decodes.
func TestDebeziumSpanContextColumn(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	props := "#Thu Dec 04 10:02:00 UTC 2026\ntraceparent=" + tp + "\ntracestate=k\\=v\n"
	cols := append(append([]string(nil), debeziumCols...), outbox.DebeziumTracingSpanContext)
	oids := append(append([]uint32(nil), debeziumOIDs...), oidVarchar)
	row := func(span col) []byte {
		return insertMsg(testRel, txt(`\x7b7d`), txt("t"), txt("a-1"), txt("acme"), txt("1c0ab0b8-5bd8-4b8b-a4c4-0e1d3b9bc3a1"), txt("orders"), span)
	}
	for _, tc := range []struct {
		name   string
		extras []string
		rel    []byte
		ins    []byte
		tp, ts string
		keep   bool // the column is also carried as a header the mapping names
	}{
		{"read as Debezium does", nil, typedRelationMsg(testRel, "inventory", "outbox", cols, oids), row(txt(props)), tp, "k=v", false},
		{"null column", nil, typedRelationMsg(testRel, "inventory", "outbox", cols, oids), row(null), "", "", false},
		{"no such column", nil, typedRelationMsg(testRel, "inventory", "outbox", debeziumCols, debeziumOIDs),
			insertMsg(testRel, txt(`\x7b7d`), txt("t"), txt("a-1"), txt("acme"), txt("1c0ab0b8-5bd8-4b8b-a4c4-0e1d3b9bc3a1"), txt("orders")), "", "", false},
		{"also an extra header", []string{"tenant:x-tenant", "tracingspancontext:x-span"}, typedRelationMsg(testRel, "inventory", "outbox", cols, oids),
			row(txt(props)), tp, "k=v", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := debeziumMapping(t)
			if tc.extras != nil {
				m.ExtraHeaders = tc.extras
			}
			d, err := NewMappedDecoder(&m)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := decodeOne(t, d, tc.rel, tc.ins)
			if err != nil {
				t.Fatal(err)
			}
			h := ev.Headers
			if h[tracing.Traceparent] != tc.tp || h[tracing.Tracestate] != tc.ts || h["x-tenant"] != "acme" {
				t.Errorf("headers %q, want traceparent %q, tracestate %q", h, tc.tp, tc.ts)
			}
			if _, ok := h[spanContextHeader]; ok {
				t.Error("the internal span context header leaked")
			}
			if _, ok := h["x-span"]; ok != tc.keep {
				t.Errorf("x-span header present %v, want %v", ok, tc.keep)
			}
		})
	}
}

package cdc

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/benchcpu"
)

// BenchmarkEventCycle is the relay's per-event work around the produce
// engine, on one core: publish (the per-event struct, the record build,
// the tracker) and, a window of 1,000 events at a time as from a draining
// relay, the engine's record view and the ack (tracker, metrics,
// commit→ack). Allocations per event are what the garbage collector pays
// for.
func BenchmarkEventCycle(b *testing.B) {
	s, ps, feed := eventCycle(b, benchWindow)
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-123456", EventType: "order.created",
		Payload: []byte(`{"id": "o-123456", "amount": 1200, "currency": "EUR", "items": [{"sku": "a-1", "qty": 2}]}`), JSONChecked: true}
	ctx := context.Background()
	b.ReportAllocs()
	clock := benchcpu.Start()
	for b.Loop() {
		if err := s.publish(ctx, e, 1); err != nil {
			b.Fatal(err)
		}
		if len(feed) == benchWindow {
			for range benchWindow {
				p := <-feed
				p.record().Offset = 1
				ps.delivered(p)
			}
		}
	}
	clock.Report(b, 1, "")
}

package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/cdc/ack"
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
	m, err := newMetrics(prometheus.NewRegistry(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	tr := ack.New(1<<20, 1<<40)
	feed := make(chan *pending, benchWindow)
	s := &stream{cfg: &Config{}, m: m, tr: tr, build: outbox.NewBuilder(""), feed: feed, commitTime: time.Now()}
	ps := &producerSession{m: m, tr: tr}
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-123456", EventType: "order.created",
		Payload: []byte(`{"id": "o-123456", "amount": 1200, "currency": "EUR", "items": [{"sku": "a-1", "qty": 2}]}`), JSONChecked: true}
	ctx := context.Background()
	tr.Begin()
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

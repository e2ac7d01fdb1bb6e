package worker_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// TestRunnerAppliesCloudEvents: records the relay writes with --record-format
// cloudevents (ce_id, ce_type instead of event_id, event_type) are applied
// exactly once like the contract's, beside them on the same topic.
func TestRunnerAppliesCloudEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.insertOrders(t, "o-1", "o-2")
	m := outbox.DefaultMapping()
	m.Format = outbox.FormatCloudEvents
	build := outbox.NewBuilder("").WithFormat(&m)
	ce := f.orderEvent("o-1")
	var rec, again outbox.Record
	if err := build.Build(&rec, ce); err != nil {
		t.Fatal(err)
	}
	if err := build.Build(&again, ce); err != nil {
		t.Fatal(err)
	}
	if _, ok := headerOf(rec.Msg.Headers, "ce_id"); !ok {
		t.Fatal("built record has no ce_id")
	}
	plain, err := outbox.Message(f.orderEvent("o-2"), "")
	if err != nil {
		t.Fatal(err)
	}
	produceRaw(t, f.brokers, &rec.Msg, plain, &again.Msg) // the CloudEvent twice
	spec := sqlCounting(t, f)
	r := start(t, f.config(), f.pool, spec)
	waitFor(t, 30*time.Second, "3 records handled", func() bool {
		return r.events(f.topic, resultApplied)+r.events(f.topic, resultDuplicate) == 3
	})
	if a, d := r.events(f.topic, resultApplied), r.events(f.topic, resultDuplicate); a != 2 || d != 1 {
		t.Errorf("applied %d, duplicates %d; want 2 and 1", a, d)
	}
	if n := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1 AND status = 'processed'`); n != 2 {
		t.Errorf("%d orders applied exactly once, want 2", n)
	}
	if n := f.count(t, `SELECT count(*) FROM processed_events WHERE event_id = $1`, ce.ID); n != 1 {
		t.Errorf("the CloudEvent's ce_id is in the inbox %d times, want 1", n)
	}
}

func headerOf(hs []sarama.RecordHeader, name string) (string, bool) {
	for _, h := range hs {
		if string(h.Key) == name {
			return string(h.Value), true
		}
	}
	return "", false
}

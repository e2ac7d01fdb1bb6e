package cdc

import (
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestShutdownIsBoundedWithoutBroker stops a relay whose broker is gone
// (killed: connections are refused), once while events are in flight in a
// streaming session and once while the relay cannot even connect: Run
// returns within --shutdown-timeout and a few seconds, not after the
// producer's retries give up.
func TestShutdownIsBoundedWithoutBroker(t *testing.T) {
	t.Parallel() // mostly waits for a private broker to start
	const timeout = 2 * time.Second
	const bound = 10 * time.Second // generous: a bound, not a benchmark
	env := testenv.Shared(t)
	k := testenv.StartKafka(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, k.Brokers())
	cfg.ShutdownTimeout = timeout
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	w := newWriter(t, db, 10)
	w.txn(10, false, true)
	col := consume(t, k.Brokers(), cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)

	k.Kill(t)
	w.txn(50, false, true) // read, never acknowledged
	// An event to a topic the session has not used yet: the feeder asks
	// the (unreachable) cluster about it.
	mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'payments', 'p1', 'payment.created', '{}')`)
	waitFor(t, 30*time.Second, "events in flight", func() bool { return metricValue(t, r, "eventforge_cdc_in_flight_events") > 0 })
	time.Sleep(2 * time.Second) // the producer retries against the refusing broker
	assertStopsWithin(t, r, bound)

	r = startRelay(t, cfg) // cannot connect to Kafka: reconnecting
	time.Sleep(3 * time.Second)
	assertStopsWithin(t, r, bound)
}

func assertStopsWithin(t *testing.T, r *running, bound time.Duration) {
	t.Helper()
	state := r.State()
	began := time.Now()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return within 2 minutes of the shutdown")
	}
	took := time.Since(began)
	t.Logf("Run returned %s after the shutdown (state before: %s)", took.Round(time.Millisecond), state)
	if r.err != nil {
		t.Errorf("Run = %v", r.err)
	}
	if took > bound {
		t.Fatalf("Run returned %s after the shutdown, want under %s", took.Round(time.Millisecond), bound)
	}
}

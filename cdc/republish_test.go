package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestRepublishResendsRangeWithOriginalIDs is the recovery of a lost slot:
// rows created in [since, until) go to Kafka again with their event IDs and
// the relay's message format; rows outside the range do not.
func TestRepublishResendsRangeWithOriginalIDs(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	w := newWriter(t, db, 7)
	w.txn(5, false, true)
	before := w.committed
	w.committed = map[uuid.UUID]int{}
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	for range 30 {
		w.single()
	}
	w.txn(200, true, true)
	w.txn(10, false, false)
	time.Sleep(20 * time.Millisecond)
	until := time.Now()
	time.Sleep(20 * time.Millisecond)
	w.txn(5, false, true) // after the range

	res, err := Republish(context.Background(), cfg, since, until, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 230 || res.Rejected != 0 {
		t.Fatalf("Republish = %+v, want 230 published", res)
	}
	topic := cfg.TopicPrefix + "orders"
	inRange := map[uuid.UUID]int{}
	for id, seq := range w.committed {
		if seq <= 5+230 {
			inRange[id] = seq
		}
	}
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, inRange, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	lastSeq := map[string]int{}
	for _, m := range col.records() {
		idText, _ := header(m, "event_id")
		id := uuid.MustParse(idText)
		if _, ok := inRange[id]; !ok {
			t.Fatalf("event %s outside the range was republished (before: %v)", id, before[id] > 0)
		}
		if v, _ := header(m, "trace"); v != "t-1" {
			t.Fatalf("trace header %q", v)
		}
		if seq := inRange[id]; seq <= lastSeq[string(m.Key)] {
			t.Fatalf("key %s out of order", m.Key)
		} else {
			lastSeq[string(m.Key)] = seq
		}
	}
	if n := col.len(); n != 230 {
		t.Fatalf("%d records, want 230", n)
	}
}

// TestSurvivesPostgresImmediateRestart crashes a private PostgreSQL under the
// relay (docs/design.md#permanent-slot): the relay reconnects by itself and every committed
// event arrives, duplicates allowed.
func TestSurvivesPostgresImmediateRestart(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	env := testenv.Shared(t)
	pg := testenv.StartPostgres(t)
	url := pg.URL()
	cfg := testConfig(t, url, env.Brokers)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	db := connect(t, url)
	w := newWriter(t, db, 10)
	for range 5 {
		w.txn(200, false, true)
	}
	committed := map[uuid.UUID]int{}
	for id, s := range w.committed {
		committed[id] = s
	}
	db.Close(context.Background())
	pg.Restart(t, true)
	db = connect(t, url)
	w.db = db
	for range 5 {
		w.txn(200, true, true)
	}
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	dups := waitDistinct(t, col, w.committed, 90*time.Second)
	t.Logf("%d events after an immediate PostgreSQL restart, %d duplicates", len(w.committed), dups)
	if err := r.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

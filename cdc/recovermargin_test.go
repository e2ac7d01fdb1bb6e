package cdc

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestSamplesSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ss := samples{}.add(txnSample{lsn: 100, oldest: t0}).add(txnSample{lsn: 200, oldest: t0.Add(time.Second)}).add(txnSample{lsn: 300, oldest: t0.Add(-time.Minute)})
	for _, tc := range []struct {
		p    pglogrepl.LSN
		want time.Time
		ok   bool
		left int
	}{
		{100, time.Time{}, false, 3}, // a commit ending at a sample's position may have committed before it
		{101, t0, true, 3},
		{250, t0.Add(time.Second), true, 2},
		{301, t0.Add(-time.Minute), true, 1}, // a long transaction's start holds the margin back
	} {
		left, got, ok := ss.since(tc.p)
		if ok != tc.ok || !got.Equal(tc.want) || len(left) != tc.left {
			t.Errorf("since(%s) = %s, %v, %d left; want %s, %v, %d", tc.p, got, ok, len(left), tc.want, tc.ok, tc.left)
		}
	}
	var many samples
	for i := range maxSamples + 10 {
		many = many.add(txnSample{lsn: pglogrepl.LSN(i + 1), oldest: t0.Add(time.Duration(-i%7) * time.Second)})
	}
	if len(many) != maxSamples || !many[0].oldest.Equal(t0.Add(-6*time.Second)) {
		t.Fatalf("%d samples kept, oldest start %s: want %d and the earliest start merged in", len(many), many[0].oldest, maxSamples)
	}
}

var backfillSinceArg = regexp.MustCompile(`--backfill-since (\S+)`)

// TestLostSlotRecoveryMargin loses the slot of a relay (PostgreSQL 16: no
// failover slots) while a long transaction, begun half-way through the
// events, commits only after the relay's last confirmation. The refusal
// proposes a --backfill-since from relay_state's recover_since: early
// enough for the long transaction's row (0 lost), and the duplicates are the
// events since that transaction began, not an hour's.
func TestLostSlotRecoveryMargin(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	version := testenv.Version()
	if version == "" || version >= "17" {
		version = "16"
	}
	pg := testenv.StartPostgresVersion(t, version)
	db := connect(t, pg.URL())
	cfg := testConfig(t, pg.URL(), env.Brokers)
	cfg.StateWriteInterval = 200 * time.Millisecond
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	w := newWriter(t, db, 20)
	// Spread over 3 s: the proposal is rounded down to the second and the
	// samples are 200ms apart, so about a second of these is republished.
	for range 10 {
		w.txn(10, false, true)
		time.Sleep(300 * time.Millisecond)
	}
	long, err := connect(t, pg.URL()).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	longID := uuid.New()
	if _, err := long.Exec(context.Background(), insertRows, []uuid.UUID{longID}, []string{"long"}, []int{0}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.txn(10, false, true)
		time.Sleep(50 * time.Millisecond)
	}
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)
	time.Sleep(4 * cfg.StateWriteInterval) // relay_state catches up
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	delivered := len(w.committed)
	if err := long.Commit(context.Background()); err != nil { // after the last confirmation
		t.Fatal(err)
	}
	w.committed[longID] = 0
	w.txn(10, false, true) // the gap
	mustExec(t, db, "SELECT pg_drop_replication_slot($1)", cfg.Slot)

	r = startRelay(t, cfg)
	<-r.done
	m := backfillSinceArg.FindStringSubmatch(errString(r.err))
	if !errors.Is(r.err, ErrSlotMissing) || m == nil {
		t.Fatalf("Run = %v, want the missing slot refused with a --backfill-since", r.err)
	}
	since, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		t.Fatal(err)
	}
	var longStart time.Time
	if err := db.QueryRow(context.Background(), "SELECT created_at FROM outbox WHERE event_id = $1", longID).Scan(&longStart); err != nil {
		t.Fatal(err)
	}
	if since.After(longStart) {
		t.Fatalf("proposed --backfill-since %s is after the long transaction's rows (%s): the recovery would miss them", since, longStart)
	}
	if _, err := slots.Drop(context.Background(), db, cfg.Slot); err != nil {
		t.Fatal(err)
	}
	cfg.BackfillSince = since
	startRelay(t, cfg)
	dups := waitDistinct(t, col, w.committed, 60*time.Second)
	var hour int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE created_at >= $1", since.Add(-time.Hour)).Scan(&hour); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s: %d events delivered before the slot was lost; the recovery from recover_since (%s before the long transaction began) republished %d of them again; an hour's margin would have republished all %d",
		version, delivered, longStart.Sub(since).Round(time.Millisecond), dups, hour-len(w.committed)+delivered)
	if dups >= delivered {
		t.Errorf("%d duplicates: the margin did not shrink below the whole history (%d)", dups, delivered)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

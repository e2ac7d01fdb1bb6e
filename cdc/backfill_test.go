package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// startLoad runs writers like orderLoad's until the returned stop is
// called, except that a multi-row transaction inserts each row with its own
// statement: the order the backfill keeps within a transaction (the rows of
// one statement have no order a snapshot can see).
func startLoad(t *testing.T, url string) (*orderLoad, func()) {
	t.Helper()
	l := &orderLoad{byKey: map[string][]uuid.UUID{}, ids: map[uuid.UUID]int{}, writers: 3, keys: 4, pause: 2 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.runWith(ctx, url, l.writeStatements) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if len(l.errs) > 0 {
				t.Fatalf("writers: %v", l.errs)
			}
		})
	}
	t.Cleanup(stop)
	return l, stop
}

func (l *orderLoad) writeStatements(ctx context.Context, url string, w int) error {
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	bg := context.WithoutCancel(ctx)
	for seq := 0; ctx.Err() == nil; seq++ {
		n := 1
		if seq%10 == 9 {
			n = 10 // a transaction of several rows per key
		}
		tx, err := db.Begin(bg)
		if err != nil {
			return err
		}
		ids, keys := make([]uuid.UUID, n), make([]string, n)
		for i := range n {
			ids[i], keys[i] = uuid.New(), fmt.Sprintf("w%d-k%d", w, (seq+i*7)%l.keys)
			if _, err := tx.Exec(bg, insertRows, ids[i:i+1], keys[i:i+1], []int{seq}); err != nil {
				return fmt.Errorf("writer %d: %w", w, err)
			}
		}
		if err := tx.Commit(bg); err != nil {
			return fmt.Errorf("writer %d: %w", w, err)
		}
		l.committed(keys, ids)
		select {
		case <-time.After(l.pause):
		case <-ctx.Done():
		}
	}
	return nil
}

// checkKeyOrder reads the topic until every event of l has arrived and fails
// on a key whose first occurrences are out of commit order, or on ids that
// must not be there. It returns the number of duplicates.
func checkKeyOrder(t *testing.T, col *collector, l *orderLoad, absent map[uuid.UUID]bool) int {
	t.Helper()
	l.mu.Lock()
	want := make(map[uuid.UUID]int, len(l.ids))
	for id := range l.ids {
		want[id] = 0
	}
	l.mu.Unlock()
	dups := waitDistinct(t, col, want, 60*time.Second)
	got := map[string][]uuid.UUID{}
	for _, m := range col.records() {
		text, _ := header(m, "event_id")
		id := uuid.MustParse(text)
		if absent[id] {
			t.Fatalf("event %s created before --backfill-since was published", id)
		}
		got[string(m.Key)] = append(got[string(m.Key)], id)
	}
	if bad, example := firstOccurrenceViolations(l.byKey, got); bad > 0 {
		t.Fatalf("%d keys with first occurrences out of commit order; %s", bad, example)
	}
	return dups
}

// waitCreatingSlot waits until a walsender's CREATE_REPLICATION_SLOT of slot
// waits for a running transaction to end before its consistent point.
func waitCreatingSlot(t *testing.T, db *pgx.Conn, slot string) {
	t.Helper()
	waitFor(t, 30*time.Second, "slot creation waiting for the open transaction", func() bool {
		var n int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'walsender' AND wait_event = 'transactionid' AND query LIKE 'CREATE_REPLICATION_SLOT ' || $1 || ' %'`, slot).Scan(&n)
		return err == nil && n > 0
	})
}

// TestBackfillPublishesSnapshotBeforeStream: rows committed before the
// first start (and while the slot is being created, under a steady load) are
// published from the slot's snapshot before the stream, so every key's first
// occurrences are in commit order, every row since --backfill-since arrives
// and none arrives twice (the snapshot and the stream meet exactly). Rows
// created before --backfill-since are not published.
func TestBackfillPublishesSnapshotBeforeStream(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	old := map[uuid.UUID]bool{}
	for _, k := range []string{"w0-k0", "w1-k1", "held"} {
		id := uuid.New()
		mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ($1, 'orders', $2, 'order.created', '{}', now() - interval '2 hours')`, id, k)
		old[id] = true
	}
	cfg := testConfig(t, url, env.Brokers)
	cfg.BackfillSince = time.Now().Add(-time.Hour)
	l, stopLoad := startLoad(t, url)
	waitFor(t, 10*time.Second, "rows before the first start", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.ids) > 100
	})
	// A transaction open across the slot's creation: the slot's consistent
	// point waits for it, while the writers go on committing.
	held, err := connect(t, url).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	heldID := uuid.New()
	if _, err := held.Exec(context.Background(), insertRows, []uuid.UUID{heldID}, []string{"held"}, []int{1}); err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, cfg)
	waitCreatingSlot(t, db, cfg.Slot)
	time.Sleep(300 * time.Millisecond) // writers commit while the snapshot is being built
	if err := held.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.committed([]string{"held"}, []uuid.UUID{heldID})
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	id := uuid.New()
	mustExec(t, db, insertRows, []uuid.UUID{id}, []string{"held"}, []int{2}) // streamed
	l.committed([]string{"held"}, []uuid.UUID{id})
	time.Sleep(300 * time.Millisecond)
	stopLoad()

	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	if dups := checkKeyOrder(t, col, l, old); dups != 0 {
		t.Fatalf("%d duplicates: the snapshot and the stream overlap", dups)
	}
	t.Logf("%d events, snapshot then stream, in per-key order", len(l.ids))
}

// TestRecoveryAfterDroppedSlotKeepsKeyOrder: a relay streams under load, is
// stopped, its slot is dropped (as after a lost slot) while the writers go
// on, and one command recovers: cdc run with --backfill-since before the
// last confirmation. The rows of the gap arrive, before any newer row of
// their key.
func TestRecoveryAfterDroppedSlotKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	cfg := testConfig(t, url, env.Brokers)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	l, stopLoad := startLoad(t, url)
	time.Sleep(500 * time.Millisecond)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	lastConfirmed := time.Now()
	time.Sleep(300 * time.Millisecond) // the gap: committed, never streamed
	if _, err := slots.Drop(context.Background(), db, cfg.Slot); err != nil {
		t.Fatal(err)
	}
	cfg.BackfillSince = lastConfirmed.Add(-time.Hour)
	r = startRelay(t, cfg)
	waitFor(t, 60*time.Second, "streaming again", func() bool { return r.State() == stateStreaming })
	time.Sleep(300 * time.Millisecond)
	stopLoad()

	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	dups := checkKeyOrder(t, col, l, nil)
	t.Logf("%d events across a dropped slot, %d duplicates (republished by the backfill)", len(l.ids), dups)
}

// TestNewSlotWarnsAboutUnpublishedRows: a slot created without a backfill
// while the outbox holds rows says how many it will never deliver, and how
// to publish them.
func TestNewSlotWarnsAboutUnpublishedRows(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	w := newWriter(t, db, 3)
	w.txn(3, false, true)
	cfg := testConfig(t, url, env.Brokers)
	var buf testenv.Buffer
	relay, err := New(cfg, slog.New(slog.NewTextHandler(&buf, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	waitFor(t, streamingDeadline, "streaming", func() bool { return relay.State() == stateStreaming })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 outbox rows committed before it", "slot drop --slot " + cfg.Slot + " --yes", "--backfill-since"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("log does not say %q:\n%s", want, buf.String())
		}
	}
}

// TestUnfinishedBackfillIsRepeated: a relay that died mid-backfill leaves
// the slot and the pending mark in relay_state. The next start with the
// backfill drops the slot, creates it again and publishes the rows; a start
// without the backfill refuses instead of streaming past them.
func TestUnfinishedBackfillIsRepeated(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	cfg := testConfig(t, url, env.Brokers)
	w := newWriter(t, db, 3)
	w.txn(5, false, true) // before the slot: only the backfill publishes these
	mustExec(t, db, "INSERT INTO relay_state (slot_name, confirmed_lsn) VALUES ($1, '0/0')", cfg.Slot)
	mustExec(t, db, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot)

	err := runUntilFatal(t, cfg)
	if !errors.Is(err, ErrBackfillUnfinished) || !strings.Contains(err.Error(), "--backfill-since") {
		t.Fatalf("Run without the backfill = %v, want a refusal", err)
	}
	cfg.BackfillAll = true
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	w.txn(5, false, true)
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 30*time.Second)
	var lsn string
	if err := db.QueryRow(context.Background(), "SELECT confirmed_lsn::text FROM relay_state WHERE slot_name = $1", cfg.Slot).Scan(&lsn); err != nil || lsn == "0/0" {
		t.Fatalf("relay_state after the backfill: %q (%v), want the consistent point", lsn, err)
	}
}

// TestSlotLockKeepsSecondRelayStandby: while another relay holds the slot's
// lock (as it does during a backfill, before any walsender makes the slot
// active), a relay waits as a standby naming the holder's PID and creates
// nothing; once the lock is free it creates the slot and streams.
func TestSlotLockKeepsSecondRelayStandby(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	cfg := testConfig(t, url, env.Brokers)
	holder := connect(t, url)
	mustExec(t, holder, "SELECT pg_advisory_lock($1, hashtext($2))", slotLockClass, cfg.Slot)
	var pid int32
	if err := holder.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var buf testenv.Buffer
	relay, err := New(cfg, slog.New(slog.NewTextHandler(&buf, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 30*time.Second, "standby", func() bool { return relay.State() == stateStandby })
	if !strings.Contains(buf.String(), fmt.Sprintf("active for PID %d", pid)) {
		t.Fatalf("standby log does not name PID %d:\n%s", pid, buf.String())
	}
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", cfg.Slot).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a standby created the slot (%d, %v)", n, err)
	}
	mustExec(t, holder, "SELECT pg_advisory_unlock($1, hashtext($2))", slotLockClass, cfg.Slot)
	waitFor(t, streamingDeadline, "streaming", func() bool { return relay.State() == stateStreaming })
}

// TestBackfillRejectsLikeTheStream: rows of the snapshot that cannot be
// produced (a topic name Kafka refuses, a record over the limit) are
// recorded in outbox_rejected, as streamed ones are, and the others go out.
func TestBackfillRejectsLikeTheStream(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	cfg := testConfig(t, url, env.Brokers)
	cfg.MaxMessageBytes = 1024
	cfg.BackfillAll = true
	insert := func(aggregateType string, payloadBytes int) uuid.UUID {
		id := uuid.New()
		mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, $2, 'k', 'order.created', jsonb_build_object('pad', repeat('x', $3::int)))`, id, aggregateType, payloadBytes)
		return id
	}
	good := map[uuid.UUID]int{insert("orders", 10): 1}
	badTopic, tooLarge := insert("bad topic", 10), insert("orders", 2000)
	good[insert("orders", 10)] = 2
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	rows, err := db.Query(context.Background(), "SELECT event_id, reason FROM outbox_rejected")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var reason string
		if err := rows.Scan(&id, &reason); err != nil {
			t.Fatal(err)
		}
		reasons[id] = reason
	}
	if rows.Err() != nil || len(reasons) != 2 || reasons[badTopic] == "" || !strings.Contains(reasons[tooLarge], "exceeds the limit") {
		t.Fatalf("outbox_rejected = %v (%v), want the bad topic and the too large row", reasons, rows.Err())
	}
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	if dups := waitDistinct(t, col, good, 30*time.Second); dups != 0 || col.len() != 2 {
		t.Fatalf("%d records, %d duplicates; want the 2 good rows", col.len(), dups)
	}
}

// TestBackfillFollowsCommitTimestamps: with track_commit_timestamp on, the
// backfill orders a key's rows by their transactions' commits, not by
// created_at (the start): a transaction that began first but committed last
// comes last, as the slot would have streamed it.
func TestBackfillFollowsCommitTimestamps(t *testing.T) {
	t.Parallel() // mostly waits for a private server to restart
	env := testenv.Shared(t)
	pg := testenv.StartPostgres(t)
	admin := connect(t, pg.URL())
	mustExec(t, admin, "ALTER SYSTEM SET track_commit_timestamp = on")
	admin.Close(context.Background())
	pg.Restart(t, false)
	url := pg.URL()
	begin := func() pgx.Tx {
		tx, err := connect(t, url).Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	insert := func(tx pgx.Tx) uuid.UUID {
		id := uuid.New()
		if _, err := tx.Exec(context.Background(), insertRows, []uuid.UUID{id}, []string{"k"}, []int{0}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first, second := begin(), begin() // first starts earlier: the smaller created_at
	late := insert(first)
	time.Sleep(10 * time.Millisecond)
	early := insert(second)
	for _, tx := range []pgx.Tx{second, first} { // but commits last
		if err := tx.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t, url, env.Brokers)
	cfg.BackfillAll = true
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, map[uuid.UUID]int{early: 1, late: 2}, 30*time.Second)
	var got []string
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		got = append(got, id)
	}
	if want := []string{early.String(), late.String()}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("key k in Kafka: %v, want commit order %v", got, want)
	}
}

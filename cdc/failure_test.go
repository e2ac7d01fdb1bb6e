package cdc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// distinct waits until col holds every id of want (by event_id header) and
// returns how many records carried an id seen before.
func waitDistinct(t testing.TB, col *collector, want map[uuid.UUID]int, timeout time.Duration) (dups int) {
	t.Helper()
	var seen map[string]int
	waitFor(t, timeout, "events in Kafka", func() bool {
		seen = map[string]int{}
		for _, m := range col.records() {
			id, _ := header(m, "event_id")
			seen[id]++
		}
		for id := range want {
			if seen[id.String()] == 0 {
				return false
			}
		}
		return true
	})
	for _, n := range seen {
		dups += n - 1
	}
	return dups
}

// TestSlotNeverPassesUnackedEvents stops a private broker with events
// committed but not acked: the slot must not confirm their transaction. After
// the broker is back every event arrives and the slot moves (docs/design.md#flush-confirms, #confirm-by-end-lsn, #ordered-acks, #produce-error-ends-session).
func TestSlotNeverPassesUnackedEvents(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	env := testenv.Shared(t)
	k := testenv.StartKafka(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, k.Brokers())
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	w := newWriter(t, db, 10)
	w.txn(100, false, true)
	afterA := currentLSN(t, db)
	topic := cfg.TopicPrefix + "orders"
	col := consume(t, k.Brokers(), topic)
	waitDistinct(t, col, w.committed, 60*time.Second)
	waitFor(t, 30*time.Second, "slot confirmed past batch A", func() bool { return slotConfirmed(t, db, cfg.Slot) >= afterA })

	k.Stop(t)
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, 200)
	keys := make([]string, 200)
	seqs := make([]int, 200)
	for i := range ids {
		w.seq++
		ids[i], keys[i], seqs[i] = uuid.New(), "k"+string(rune('a'+i%10)), w.seq
	}
	if _, err := tx.Exec(ctx, insertRows, ids, keys, seqs); err != nil {
		t.Fatal(err)
	}
	var beforeCommit string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&beforeCommit); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		w.committed[id] = seqs[i]
	}
	for range 10 {
		w.single()
	}
	limit, _ := pglogrepl.ParseLSN(beforeCommit)
	// The relay reads B, cannot deliver it, fails its sessions and retries:
	// through all of that the slot stays before B's commit.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if got := slotConfirmed(t, db, cfg.Slot); got > limit {
			t.Fatalf("slot confirmed %s while the transaction committing after %s was not acked", got, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	k.Start(t)
	afterAll := currentLSN(t, db)
	col2 := consume(t, k.Brokers(), topic)
	dups := waitDistinct(t, col2, w.committed, 90*time.Second)
	waitFor(t, 30*time.Second, "slot confirmed past everything", func() bool { return slotConfirmed(t, db, cfg.Slot) >= afterAll })
	t.Logf("%d events, %d duplicates", len(w.committed), dups)
	if err := r.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestMissingSlotWithStateIsAnError(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	mustExec(t, db, "INSERT INTO relay_state (slot_name, confirmed_lsn) VALUES ($1, '0/1234')", cfg.Slot)
	err := runUntilFatal(t, cfg)
	if !errors.Is(err, ErrSlotMissing) {
		t.Fatalf("Run = %v, want ErrSlotMissing", err)
	}
	for _, want := range []string{"eventforge slot drop --slot " + cfg.Slot + " --yes", "cdc run --backfill-since"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if slotConfirmed(t, db, cfg.Slot) != 0 {
		t.Fatal("the slot was recreated silently")
	}
}

func TestMissingPublicationIsAnError(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	mustExec(t, db, "DROP PUBLICATION eventforge_outbox")
	err := runUntilFatal(t, cfg)
	if !errors.Is(err, ErrNoPublication) || !strings.Contains(err.Error(), "run eventforge migrate") {
		t.Fatalf("Run = %v, want ErrNoPublication naming eventforge migrate", err)
	}
}

// TestLostSlotIsAnError invalidates the slot on a private cluster
// (max_slot_wal_keep_size exceeded): the relay stops with the recovery,
// never streams from a recreated slot (docs/design.md#no-silent-slot-recreation).
func TestLostSlotIsAnError(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	pg := testenv.StartPostgres(t)
	env := testenv.Shared(t)
	url := pg.URL()
	db := connect(t, url)
	mustExec(t, db, "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
	mustExec(t, db, "SELECT pg_reload_conf()")
	cfg := testConfig(t, url, env.Brokers)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	var status string
	waitFor(t, 60*time.Second, "slot lost", func() bool {
		mustExec(t, db, "INSERT INTO orders (id, status, customer) SELECT gen_random_uuid()::text, 'created', repeat(md5(random()::text), 30) FROM generate_series(1, 3000)")
		mustExec(t, db, "SELECT pg_switch_wal()")
		mustExec(t, db, "CHECKPOINT")
		if err := db.QueryRow(context.Background(), "SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1", cfg.Slot).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status == "lost"
	})
	err := runUntilFatal(t, cfg)
	if !errors.Is(err, ErrSlotLost) {
		t.Fatalf("Run = %v, want ErrSlotLost", err)
	}
	for _, want := range []string{"eventforge slot drop --slot " + cfg.Slot + " --yes", "cdc run --backfill-since", "wal_status \"lost\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestStatusUpdatesBeatWalSenderTimeout runs against a server with a 2s
// wal_sender_timeout, idle and under backpressure (a 50-event window): the
// relay derives its status interval from the server and is never dropped
// for a replication timeout (docs/design.md#status-cadence).
func TestStatusUpdatesBeatWalSenderTimeout(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	pg := testenv.StartPostgres(t)
	env := testenv.Shared(t)
	url := pg.URL()
	db := connect(t, url)
	mustExec(t, db, "ALTER SYSTEM SET wal_sender_timeout = '2s'")
	mustExec(t, db, "SELECT pg_reload_conf()")
	cfg := testConfig(t, url, env.Brokers)
	cfg.StatusInterval = 0 // from the server: 1s
	cfg.MaxInFlightEvents = 50
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	time.Sleep(5 * time.Second) // idle: only keepalives and status updates
	w := newWriter(t, db, 10)
	for range 20 {
		w.txn(500, false, true)
	}
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 2*time.Minute)
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Fatalf("%v sessions failed: the server dropped the relay", n)
	}
	if n := metricValue(t, r, "eventforge_cdc_backpressure_seconds_total"); n == 0 {
		t.Fatal("the window never filled: the test did not exercise backpressure")
	}
}

// runUntilFatal runs a relay that is expected to stop on its own with a
// fatal error, and returns what Run returned (nil if it ran 30 s).
func runUntilFatal(t *testing.T, cfg Config) error {
	t.Helper()
	relay, err := New(cfg, testLogger(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return relay.Run(ctx)
}

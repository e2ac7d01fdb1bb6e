package cdc

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// writer writes outbox events with a global sequence number in commit order
// and remembers which committed and which rolled back (docs/design.md#labelled-writes).
type writer struct {
	t          testing.TB
	db         *pgx.Conn
	seq        int
	committed  map[uuid.UUID]int // event -> seq
	rolledBack map[uuid.UUID]bool
	keys       int
}

func newWriter(t testing.TB, db *pgx.Conn, keys int) *writer {
	return &writer{t: t, db: db, committed: map[uuid.UUID]int{}, rolledBack: map[uuid.UUID]bool{}, keys: keys}
}

const insertRows = `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
	SELECT u, 'orders', k, 'order.created', jsonb_build_object('seq', s, 'note', 'a  b', 'nested', jsonb_build_array(1, 2)),
	       '{"trace": "t-1", "n": 5}'
	FROM unnest($1::uuid[], $2::text[], $3::int[]) AS x(u, k, s)`

// txn writes n events in one transaction (plus an orders row when withOrder),
// committing or rolling back.
func (w *writer) txn(n int, withOrder, commit bool) []uuid.UUID {
	w.t.Helper()
	ctx := context.Background()
	ids := make([]uuid.UUID, n)
	keys := make([]string, n)
	seqs := make([]int, n)
	for i := range n {
		w.seq++
		ids[i], keys[i], seqs[i] = uuid.New(), "k"+strconv.Itoa(w.seq%w.keys), w.seq
	}
	tx, err := w.db.Begin(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	if withOrder {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id, status) VALUES ($1, 'created')", uuid.NewString()); err != nil {
			w.t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, insertRows, ids, keys, seqs); err != nil {
		w.t.Fatal(err)
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			w.t.Fatal(err)
		}
		for i, id := range ids {
			w.committed[id] = seqs[i]
		}
	} else {
		if err := tx.Rollback(ctx); err != nil {
			w.t.Fatal(err)
		}
		for _, id := range ids {
			w.rolledBack[id] = true
		}
	}
	return ids
}

// single writes one event in autocommit mode: a single-row transaction.
func (w *writer) single() {
	w.t.Helper()
	w.seq++
	id := uuid.New()
	if _, err := w.db.Exec(context.Background(), insertRows, []uuid.UUID{id}, []string{"k" + strconv.Itoa(w.seq%w.keys)}, []int{w.seq}); err != nil {
		w.t.Fatal(err)
	}
	w.committed[id] = w.seq
}

func TestRelayDeliversCommittedEvents(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.MaxInFlightEvents = 2000 // exercise backpressure
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	w := newWriter(t, db, 50)
	began := time.Now()
	// 20,000 committed events: 4,000 single-row transactions, 10 of 1,000
	// rows, 3,000 that also write orders (2 events each); rolled-back ones
	// in between.
	for i := range 4000 {
		w.single()
		if i%1000 == 0 {
			w.txn(5, true, false)
		}
	}
	bigTxns := make([][]uuid.UUID, 0, 10)
	for range 10 {
		bigTxns = append(bigTxns, w.txn(1000, false, true))
		w.txn(20, false, false)
	}
	for i := range 3000 {
		w.txn(2, true, true)
		if i%500 == 0 {
			w.txn(3, true, false)
		}
	}
	ended := time.Now()
	afterAll := currentLSN(t, db)
	if len(w.committed) != 20000 {
		t.Fatalf("wrote %d committed events, want 20000", len(w.committed))
	}

	topic := cfg.TopicPrefix + "orders"
	col := consume(t, env.Brokers, topic)
	seen := map[string]bool{}
	waitFor(t, 3*time.Minute, "all committed events in Kafka", func() bool {
		for _, m := range col.records() {
			id, _ := header(m, "event_id")
			seen[id] = true
		}
		return len(seen) >= len(w.committed)
	})
	// A rolled-back event written before the last commit would have arrived.
	recs := col.records()

	payloads := map[uuid.UUID]string{}
	rows, err := db.Query(context.Background(), "SELECT event_id, payload::text FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var p string
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		payloads[id] = p
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	lastSeq := map[string]int{}
	first := map[uuid.UUID]bool{}
	dups := 0
	stamp := map[uuid.UUID]time.Time{}
	for _, m := range recs {
		idText, ok := header(m, "event_id")
		if !ok {
			t.Fatalf("record without event_id header at %d/%d", m.Partition, m.Offset)
		}
		id := uuid.MustParse(idText)
		if w.rolledBack[id] {
			t.Fatalf("rolled-back event %s reached Kafka", id)
		}
		seq, ok := w.committed[id]
		if !ok {
			t.Fatalf("unknown event %s in Kafka", id)
		}
		key := string(m.Key)
		if want := "k" + strconv.Itoa(seq%50); key != want {
			t.Fatalf("event %s key %q, want %q", id, key, want)
		}
		if want := kafka.PartitionForKey(m.Key, cfg.TopicPartitions); m.Partition != want {
			t.Fatalf("event %s on partition %d, want %d (murmur2)", id, m.Partition, want)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(payloads[id])); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Value, compact.Bytes()) {
			t.Fatalf("event %s value %s, want %s", id, m.Value, compact.Bytes())
		}
		if v, _ := header(m, "event_type"); v != "order.created" {
			t.Fatalf("event_type header %q", v)
		}
		if v, _ := header(m, "aggregate_type"); v != "orders" {
			t.Fatalf("aggregate_type header %q", v)
		}
		if v, _ := header(m, "trace"); v != "t-1" {
			t.Fatalf("trace header %q", v)
		}
		if _, ok := header(m, "n"); ok {
			t.Fatal("a non-string entry of the headers column became a header")
		}
		if m.Timestamp.Before(began.Add(-2*time.Second)) || m.Timestamp.After(ended.Add(2*time.Second)) {
			t.Fatalf("event %s timestamp %s outside the writes [%s, %s]", id, m.Timestamp, began, ended)
		}
		if first[id] {
			dups++
			continue
		}
		first[id] = true
		stamp[id] = m.Timestamp
		if seq <= lastSeq[key] {
			t.Fatalf("key %s: event seq %d after seq %d: not in commit order", key, seq, lastSeq[key])
		}
		lastSeq[key] = seq
	}
	if len(first) != len(w.committed) {
		t.Fatalf("%d distinct events in Kafka, want %d", len(first), len(w.committed))
	}
	for _, ids := range bigTxns {
		for _, id := range ids[1:] {
			if !stamp[id].Equal(stamp[ids[0]]) {
				t.Fatalf("events of one transaction carry different timestamps %s and %s", stamp[id], stamp[ids[0]])
			}
		}
	}
	t.Logf("%d records, %d distinct, %d duplicates", len(recs), len(first), dups)

	// Idle again: the slot catches up with everything written.
	waitFor(t, 30*time.Second, "slot confirmed past the last commit", func() bool { return slotConfirmed(t, db, cfg.Slot) >= afterAll })
	if err := r.stop(); err != nil {
		t.Fatalf("Run after shutdown = %v, want nil", err)
	}
	var stateLSN string
	if err := db.QueryRow(context.Background(), "SELECT confirmed_lsn::text FROM relay_state WHERE slot_name = $1", cfg.Slot).Scan(&stateLSN); err != nil {
		t.Fatalf("relay_state row: %v", err)
	}
	if lsn, _ := parseLSN(stateLSN); lsn < afterAll {
		t.Fatalf("relay_state confirmed %s, want at least %s", stateLSN, afterAll)
	}
}

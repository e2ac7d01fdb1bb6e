package cdc

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// The failure-window matrix of the relay (docs/design.md#failure-windows): the real binary is
// killed by a failpoint at one point of its pipeline, then restarted without
// it. Each test checks durable facts only: the slot's confirmed_flush_lsn,
// which transactions the slot will replay (peeked from the slot itself), and
// what the topic holds, read by an independent consumer.

// fpCase is one relay crash: the slot exists (created by SQL, at start), the
// transactions are committed before the relay starts, so where the
// failpoint fires in their stream is known.
type fpCase struct {
	t     *testing.T
	cfg   Config
	db    *pgx.Conn
	w     *writer
	start pglogrepl.LSN
	topic string
	txns  []fpTxn
}

// fpTxn is one committed transaction of the test.
type fpTxn struct {
	xid   string
	ids   []uuid.UUID
	limit pglogrepl.LSN // WAL insert position just before COMMIT: the slot may not pass it unless all ids are in Kafka
}

func newFPCase(t *testing.T) *fpCase {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	c := &fpCase{t: t, cfg: testConfig(t, url, env.Brokers), db: connect(t, url)}
	c.topic = c.cfg.TopicPrefix + "orders"
	c.w = newWriter(t, c.db, 7)
	mustExec(t, c.db, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", c.cfg.Slot)
	c.start = slotConfirmed(t, c.db, c.cfg.Slot)
	return c
}

// txn commits n events in one transaction and remembers its xid and the
// position just before its commit record.
func (c *fpCase) txn(n int) fpTxn {
	c.t.Helper()
	ctx := context.Background()
	tx, err := c.db.Begin(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var x fpTxn
	ids, keys, seqs := make([]uuid.UUID, n), make([]string, n), make([]int, n)
	for i := range n {
		c.w.seq++
		ids[i], keys[i], seqs[i] = uuid.New(), "k"+strconv.Itoa(c.w.seq%c.w.keys), c.w.seq
	}
	if _, err := tx.Exec(ctx, insertRows, ids, keys, seqs); err != nil {
		c.t.Fatal(err)
	}
	var limit string
	if err := tx.QueryRow(ctx, "SELECT txid_current()::text, pg_current_wal_insert_lsn()::text").Scan(&x.xid, &limit); err != nil {
		c.t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		c.t.Fatal(err)
	}
	x.ids = ids
	x.limit, _ = pglogrepl.ParseLSN(limit)
	for i, id := range ids {
		c.w.committed[id] = seqs[i]
	}
	c.txns = append(c.txns, x)
	return x
}

// crash runs the relay with spec until the failpoint kills it.
func (c *fpCase) crash(point, spec string, extra ...string) {
	c.t.Helper()
	p := startFailProc(c.t, point+"="+spec, append(relayArgs(c.cfg), extra...)...)
	waitKilledAt(c.t, p, point, 90*time.Second)
	// The walsender notices the closed connection at once; the slot is
	// released a moment later.
	waitFor(c.t, 30*time.Second, "slot released", func() bool {
		var active bool
		err := c.db.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", c.cfg.Slot).Scan(&active)
		return err == nil && !active
	})
}

// pending reports the xids of the transactions the slot would stream again:
// those after its confirmed_flush_lsn. Peeking consumes nothing.
func (c *fpCase) pending() map[string]bool {
	c.t.Helper()
	rows, err := c.db.Query(context.Background(),
		`SELECT DISTINCT xid::text FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		 'proto_version', '1', 'publication_names', 'eventforge_outbox')`, c.cfg.Slot)
	if err != nil {
		c.t.Fatal(err)
	}
	xids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, x := range xids {
		out[x] = true
	}
	return out
}

// inKafka reads the whole topic as it is now (up to its high-water marks)
// and counts each event id.
func (c *fpCase) inKafka(brokers []string) map[string]int {
	c.t.Helper()
	n := topicRecords(c.t, brokers, c.topic)
	counts := map[string]int{}
	if n == 0 {
		return counts
	}
	col := consume(c.t, brokers, c.topic)
	waitFor(c.t, 60*time.Second, "topic read to its end", func() bool { return int64(col.len()) >= n })
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		counts[id]++
	}
	return counts
}

// recover restarts the relay without failpoints, commits one more event
// and checks that everything arrives and the slot moves past all of it.
// It returns how often each event id is in the topic.
func (c *fpCase) recover() map[string]int {
	c.t.Helper()
	p := startProc(c.t, relayArgs(c.cfg)...)
	p.waitStreaming(c.t)
	c.txn(1)
	after := currentLSN(c.t, c.db)
	col := consume(c.t, c.cfg.Kafka.Brokers, c.topic)
	waitDistinct(c.t, col, c.w.committed, 90*time.Second)
	waitFor(c.t, 30*time.Second, "slot confirmed past every event", func() bool { return slotConfirmed(c.t, c.db, c.cfg.Slot) >= after })
	if code := p.terminate(c.t); code != 0 {
		c.t.Fatalf("exit code %d after SIGTERM", code)
	}
	counts := map[string]int{}
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		counts[id]++
	}
	return counts
}

func countOf(counts map[string]int, ids []uuid.UUID) (present, records int) {
	for _, id := range ids {
		if n := counts[id.String()]; n > 0 {
			present++
			records += n
		}
	}
	return present, records
}

// TestFailpointAfterProduceBeforeAck: the broker accepts the first produce
// request of a 20-event transaction and the relay dies before it settles
// those records. Some of the transaction's records are in Kafka, none was
// acked: the slot must still replay the transaction.
func TestFailpointAfterProduceBeforeAck(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(20)
	c.crash(failpoint.CDCAfterProduceBeforeAck, "crash")
	if got := slotConfirmed(t, c.db, c.cfg.Slot); got > tx.limit {
		t.Fatalf("slot confirmed %s past the commit of a transaction none of whose events was acked (commit after %s)", got, tx.limit)
	}
	if !c.pending()[tx.xid] {
		t.Fatal("the slot will not replay a transaction whose events were never acked")
	}
	if n := topicRecords(t, c.cfg.Kafka.Brokers, c.topic); n < 1 || n > int64(len(tx.ids)) {
		t.Fatalf("%d records in Kafka, want the first request's: between 1 and the transaction's %d", n, len(tx.ids))
	}
	counts := c.recover()
	present, records := countOf(counts, tx.ids)
	t.Logf("after restart: %d/%d events, %d records", present, len(tx.ids), records)
}

// TestFailpointAfterAckBeforeConfirm: the broker acked the first record of a
// 20-event transaction, the tracker recorded it, and the relay died before
// any status update could confirm it. That record is in Kafka, the slot has
// not passed the transaction, and after the restart the whole transaction
// is sent again: the acked record arrives twice, nothing is lost.
func TestFailpointAfterAckBeforeConfirm(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(20)
	c.crash(failpoint.CDCAfterAckBeforeConfirm, "crash")
	if got := slotConfirmed(t, c.db, c.cfg.Slot); got > tx.limit {
		t.Fatalf("slot confirmed %s past the commit of a partly acked transaction (commit after %s)", got, tx.limit)
	}
	if !c.pending()[tx.xid] {
		t.Fatal("the slot will not replay a partly acked transaction")
	}
	before := c.inKafka(c.cfg.Kafka.Brokers)
	if present, _ := countOf(before, tx.ids); present < 1 {
		t.Fatal("no record in Kafka although the relay recorded an ack")
	}
	counts := c.recover()
	present, records := countOf(counts, tx.ids)
	if present != len(tx.ids) || records <= len(tx.ids) {
		t.Fatalf("after restart %d/%d events in %d records: want all, and the acked ones again", present, len(tx.ids), records)
	}
	t.Logf("in Kafka at the crash: %d events; after restart %d records of %d events", len(before), records, len(tx.ids))
}

// TestFailpointAfterConfirm: the relay dies right after a status update
// moved the slot. The slot keeps that position; every transaction it no
// longer replays was wholly in Kafka at the crash, and is not sent again.
func TestFailpointAfterConfirm(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	c.txn(20)
	c.txn(1)
	c.txn(5)
	c.crash(failpoint.CDCAfterConfirm, "crash")
	if got := slotConfirmed(t, c.db, c.cfg.Slot); got <= c.start {
		t.Fatalf("slot at %s, not past its start %s: the confirmation before the crash was lost", got, c.start)
	}
	pending := c.pending()
	before := c.inKafka(c.cfg.Kafka.Brokers)
	var confirmed []fpTxn
	for _, tx := range c.txns {
		if pending[tx.xid] {
			continue
		}
		confirmed = append(confirmed, tx)
		if present, _ := countOf(before, tx.ids); present != len(tx.ids) {
			t.Fatalf("transaction %s confirmed with %d of its %d events in Kafka", tx.xid, present, len(tx.ids))
		}
	}
	if len(confirmed) == 0 {
		t.Fatal("no transaction confirmed before the crash: the window was not exercised")
	}
	counts := c.recover()
	for _, tx := range confirmed {
		if present, records := countOf(counts, tx.ids); records != present {
			t.Fatalf("transaction %s was confirmed before the crash, yet %d of its events were sent again", tx.xid, records-present)
		}
	}
	t.Logf("%d of %d transactions confirmed before the crash; none sent again", len(confirmed), len(c.txns)-1)
}

// TestFailpointMidTransaction: the relay dies after reading 1,500 events of
// a 3,000-event transaction, with a window of 500 events in flight, so at
// least 1,000 of them are in Kafka. The slot stays before its commit, and
// after the restart all 3,000 arrive.
func TestFailpointMidTransaction(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(3000)
	c.crash(failpoint.CDCMidTransaction, "crash-after=1500", "--max-in-flight-events", "500")
	if got := slotConfirmed(t, c.db, c.cfg.Slot); got > tx.limit {
		t.Fatalf("slot confirmed %s past the commit of a half-read transaction (commit after %s)", got, tx.limit)
	}
	if !c.pending()[tx.xid] {
		t.Fatal("the slot will not replay a half-read transaction")
	}
	n := topicRecords(t, c.cfg.Kafka.Brokers, c.topic)
	if n < 1000 || n > 1500 {
		t.Fatalf("%d records in Kafka at the crash, want 1000..1500 (1500 read, at most 500 unacked)", n)
	}
	counts := c.recover()
	present, records := countOf(counts, tx.ids)
	if present != len(tx.ids) {
		t.Fatalf("%d of %d events after restart", present, len(tx.ids))
	}
	t.Logf("in Kafka at the crash: %d records; after restart %d records of %d events", n, records, len(tx.ids))
}

// startFailProc starts the binary with EVENTFORGE_FAILPOINTS=spec.
func startFailProc(t testing.TB, spec string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, []string{failpoint.EnvVar + "=" + spec}, args...)
}

// waitKilledAt waits until p dies by SIGKILL after naming point on stderr.
func waitKilledAt(t testing.TB, p *proc, point string, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("the process did not reach failpoint %s within %s; stderr:\n%s", point, timeout, p.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		t.Fatalf("process exited with %v, want SIGKILL at %s; stderr:\n%s", p.err, point, p.stderr.String())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process ended with %v, want SIGKILL at %s; stderr:\n%s", p.err, point, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "failpoint "+point+": crash") {
		t.Fatalf("killed, but not by failpoint %s; stderr:\n%s", point, p.stderr.String())
	}
}

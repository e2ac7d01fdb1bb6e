package cdc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/cdc/position"
	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// The exactly-once failure windows (docs/design.md#exactly-once): the real
// binary runs with --exactly-once and dies by a failpoint; a read_committed
// view of the topic must then hold no event twice, before and after a
// restart, and the restart must deliver every committed event.

// committedCounts reads every partition of topic to its last stable offset
// as a read_committed consumer sees it and counts each event id.
func committedCounts(t testing.TB, brokers []string, topic string) map[string]int {
	t.Helper()
	return countIDs(committedByPartition(t, brokers, topic))
}

// committedNow is committedCounts of what is committed now, once every
// partition's last stable offset held still for a moment (the markers of
// a transaction the coordinator committed land within it): it does not
// wait for the transaction a crashed relay left open, which stays open
// until the restart fences it or the transaction timeout (a minute) passes.
func committedNow(t testing.TB, brokers []string, topic string) map[string]int {
	t.Helper()
	last := int64(-1)
	waitFor(t, 10*time.Second, "the last stable offsets held still", func() bool {
		n := stableRecords(t, brokers, topic)
		still := n == last
		if !still {
			last = n
			time.Sleep(200 * time.Millisecond)
		}
		return still
	})
	return countIDs(eventsByPartition(t, brokers, topic, kafka.ReadStable))
}

// countIDs counts each event id of byPartition.
func countIDs(byPartition map[string][]uuid.UUID) map[string]int {
	counts := map[string]int{}
	for _, ids := range byPartition {
		for _, id := range ids {
			counts[id.String()]++
		}
	}
	return counts
}

func eosArgs(cfg Config, extra ...string) []string {
	return append(append(relayArgs(cfg), "--exactly-once"), extra...)
}

// noDuplicates fails on any event id counted more than once.
func noDuplicates(t testing.TB, counts map[string]int, when string) {
	t.Helper()
	for id, n := range counts {
		if n > 1 {
			t.Fatalf("%s: event %s is %d times in the read_committed view", when, id, n)
		}
	}
}

// eosRecover restarts the relay with --exactly-once and no failpoint,
// commits one more event, waits until the read_committed view holds every
// committed event and the slot moved past them, and returns the view.
func (c *fpCase) eosRecover() map[string]int {
	c.t.Helper()
	p := startProc(c.t, eosArgs(c.cfg)...)
	p.waitStreaming(c.t)
	c.txn(1)
	after := currentLSN(c.t, c.db)
	var counts map[string]int
	waitFor(c.t, 90*time.Second, "every committed event in the read_committed view", func() bool {
		counts = committedCounts(c.t, c.cfg.Kafka.Brokers, c.topic)
		for id := range c.w.committed {
			if counts[id.String()] == 0 {
				return false
			}
		}
		return true
	})
	waitFor(c.t, 30*time.Second, "slot confirmed past every event", func() bool { return slotConfirmed(c.t, c.db, c.cfg.Slot) >= after })
	if code := p.terminate(c.t); code != 0 {
		c.t.Fatalf("exit code %d after SIGTERM", code)
	}
	counts = committedCounts(c.t, c.cfg.Kafka.Brokers, c.topic)
	noDuplicates(c.t, counts, "after the restart")
	if len(counts) != len(c.w.committed) {
		c.t.Fatalf("%d distinct events in Kafka, %d committed", len(counts), len(c.w.committed))
	}
	return counts
}

// TestEOSCrashAfterKafkaCommit: the relay dies right after its first Kafka
// transaction committed, before the tracker heard of it: the slot will
// replay the transaction, and the restarted relay must skip what the
// committed Kafka transaction holds instead of sending it again.
func TestEOSCrashAfterKafkaCommit(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(20)
	c.txn(5)
	c.crash(failpoint.CDCEOSAfterKafkaCommit, "crash", "--exactly-once")
	if got := slotConfirmed(t, c.db, c.cfg.Slot); got > tx.limit {
		t.Fatalf("slot confirmed %s before the tracker heard of the commit (first commit after %s)", got, tx.limit)
	}
	if !c.pending()[tx.xid] {
		t.Fatal("the slot will not replay the transaction: the window was not exercised")
	}
	before := committedCounts(t, c.cfg.Kafka.Brokers, c.topic)
	noDuplicates(t, before, "at the crash")
	if present, _ := countOf(before, tx.ids); present != len(tx.ids) {
		t.Fatalf("%d of %d events of the first transaction committed in Kafka at the crash", present, len(tx.ids))
	}
	c.eosRecover()
}

// TestEOSCrashBeforeKafkaCommit: the relay dies with a Kafka transaction's
// records and position handed to the producer but not committed. Those
// records may be in the log, but a read_committed reader never sees them,
// and the restart delivers every event once.
func TestEOSCrashBeforeKafkaCommit(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(20)
	c.crash(failpoint.CDCEOSBeforeKafkaCommit, "crash", "--exactly-once")
	if !c.pending()[tx.xid] {
		t.Fatal("the slot will not replay a transaction that never committed in Kafka")
	}
	// Read at once: the crashed relay's transaction stays open (so its
	// records stay invisible) until the restart fences it.
	if n := stableRecords(t, c.cfg.Kafka.Brokers, c.topic); n != 0 {
		t.Fatalf("%d records visible to read_committed, but no Kafka transaction committed", n)
	}
	c.eosRecover()
	t.Logf("records in the log (aborted ones included): %d", topicRecords(t, c.cfg.Kafka.Brokers, c.topic))
}

// TestEOSCrashMidLargeTransaction: a 20,000-row PostgreSQL transaction spans
// several Kafka transactions (a window of 2,000 events commits every
// 1,000); the relay dies after reading 10,000 rows. At least 8,000 are
// committed in Kafka, the position records how far, and the restart sends
// none of them again.
func TestEOSCrashMidLargeTransaction(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(20000)
	c.crash(failpoint.CDCMidTransaction, "crash-after=10000", "--exactly-once", "--max-in-flight-events", "2000")
	if got := slotConfirmed(t, c.db, c.cfg.Slot); got > tx.limit {
		t.Fatalf("slot confirmed %s past the commit of a half-read transaction (commit after %s)", got, tx.limit)
	}
	// What is committed at the crash: the dead relay's open transaction
	// is decided only by the restart below (or its timeout), not waited for.
	before := committedNow(t, c.cfg.Kafka.Brokers, c.topic)
	noDuplicates(t, before, "at the crash")
	if len(before) < 8000 || len(before) > 10000 {
		t.Fatalf("%d events committed in Kafka at the crash, want 8000..10000 (10,000 read, at most 2,000 unacked)", len(before))
	}
	pos := readSlotPosition(t, c.cfg)
	if pos.Complete() || pos.RowLSN == 0 {
		t.Fatalf("position %+v: want a partial position inside the large transaction", pos)
	}
	c.eosRecover()
	t.Logf("committed at the crash: %d of %d; position %+v", len(before), len(tx.ids), pos)
}

// readSlotPosition reads the relay's recorded position from its topic, as
// committed now (a crashed relay's open transaction left out, not waited
// for).
func readSlotPosition(t testing.TB, cfg Config) position.Position {
	t.Helper()
	cl, err := sarama.NewClient(cfg.Kafka.Brokers, cfg.Kafka.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pos, err := position.ReadNow(context.Background(), cl, cfg.positionTopic(), cfg.Slot)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// TestEOSZombieRelayFenced: relay A has a Kafka transaction's records
// handed over and is about to commit when it is frozen (SIGSTOP) and loses
// its replication connection. Relay B takes the slot, fences A's
// transactional id (A's open transaction is aborted) and delivers
// everything. When A resumes, its commit fails, it confirms nothing, and it
// waits as a standby: nothing is duplicated.
func TestEOSZombieRelayFenced(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	tx := c.txn(20)
	a := startFailProc(t, failpoint.CDCEOSBeforeKafkaCommit+"=pause", eosArgs(c.cfg)...)
	waitFor(t, 60*time.Second, "relay A about to commit", func() bool {
		return strings.Contains(a.stderr.String(), "failpoint "+failpoint.CDCEOSBeforeKafkaCommit+": pause")
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// A network partition: the server drops A's walsender.
	mustExec(t, c.db, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", c.cfg.Slot)
	waitFor(t, 30*time.Second, "slot released", func() bool {
		var active bool
		err := c.db.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", c.cfg.Slot).Scan(&active)
		return err == nil && !active
	})
	b := startProc(t, eosArgs(c.cfg)...)
	b.waitStreaming(t)
	c.txn(5)
	waitFor(t, 60*time.Second, "relay B delivered every event", func() bool {
		return len(committedCounts(t, c.cfg.Kafka.Brokers, c.topic)) == len(c.w.committed)
	})
	confirmedByB := slotConfirmed(t, c.db, c.cfg.Slot)
	if confirmedByB <= tx.limit {
		waitFor(t, 30*time.Second, "B confirmed", func() bool { return slotConfirmed(t, c.db, c.cfg.Slot) > tx.limit })
	}
	logBefore := len(a.stderr.String())
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitFor(t, 60*time.Second, "relay A's commit refused", func() bool {
		return strings.Contains(a.stderr.String()[logBefore:], "Kafka transaction not committed")
	})
	waitFor(t, 60*time.Second, "relay A standing by", func() bool {
		return strings.Contains(a.stderr.String()[logBefore:], "waiting as standby")
	})
	after := a.stderr.String()[logBefore:]
	if !strings.Contains(after, "fenced") {
		t.Errorf("relay A's commit did not fail as fenced:\n%s", after)
	}
	c.txn(3)
	waitFor(t, 60*time.Second, "relay B delivered the events written after A resumed", func() bool {
		return len(committedCounts(t, c.cfg.Kafka.Brokers, c.topic)) == len(c.w.committed)
	})
	noDuplicates(t, committedCounts(t, c.cfg.Kafka.Brokers, c.topic), "after the zombie resumed")
	b.terminate(t)
	a.kill(t)
}

// TestEOSHeartbeatsAndRestart: in exactly-once mode a quiet outbox's
// heartbeats still move the slot (they produce nothing, so no Kafka
// transaction is needed), and events relayed before an orderly restart are
// not relayed again after it.
func TestEOSHeartbeatsAndRestart(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	c.cfg.ExactlyOnce = true
	c.cfg.HeartbeatInterval = 200 * time.Millisecond
	r := startRelay(t, c.cfg)
	waitFor(t, 30*time.Second, "relay streaming", func() bool { return r.State() == stateStreaming })
	idle := currentLSN(t, c.db)
	waitFor(t, 30*time.Second, "heartbeats confirmed past the idle position", func() bool { return slotConfirmed(t, c.db, c.cfg.Slot) > idle })
	c.txn(30)
	waitFor(t, 60*time.Second, "events committed in Kafka", func() bool {
		return len(committedCounts(t, c.cfg.Kafka.Brokers, c.topic)) == len(c.w.committed)
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	r = startRelay(t, c.cfg)
	c.txn(5)
	waitFor(t, 60*time.Second, "events after the restart committed in Kafka", func() bool {
		return len(committedCounts(t, c.cfg.Kafka.Brokers, c.topic)) == len(c.w.committed)
	})
	noDuplicates(t, committedCounts(t, c.cfg.Kafka.Brokers, c.topic), "after an orderly restart")
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestEOSRefusedRecordIsSetAside: in exactly-once mode a record the broker
// refuses for good aborts its Kafka transaction; the relay first records it
// in outbox_rejected, and the next session skips it, so it never reaches a
// read_committed reader and everything else arrives once.
func TestEOSRefusedRecordIsSetAside(t *testing.T) {
	t.Parallel()
	c := newFPCase(t)
	c.cfg.ExactlyOnce = true
	r := startRelay(t, c.cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	first := c.txn(3)
	waitFor(t, 30*time.Second, "first events committed in Kafka", func() bool {
		return len(committedCounts(t, c.cfg.Kafka.Brokers, c.topic)) == len(first.ids)
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	alterTopic(t, c.cfg.Kafka.Brokers, c.topic, "message.timestamp.before.max.ms", "1000")
	refused := c.txn(1)
	delete(c.w.committed, refused.ids[0])
	afterRefused := currentLSN(t, c.db)
	time.Sleep(3 * time.Second) // its commit time is now older than the topic accepts

	r = startRelay(t, c.cfg)
	waitFor(t, 60*time.Second, "the refused event in outbox_rejected", func() bool { return rejectedReason(t, c.db, refused.ids[0]) != "" })
	waitFor(t, 60*time.Second, "slot confirmed past the refused event", func() bool { return slotConfirmed(t, c.db, c.cfg.Slot) >= afterRefused })
	alterTopic(t, c.cfg.Kafka.Brokers, c.topic, "message.timestamp.before.max.ms", "9223372036854775807")
	c.txn(2)
	var counts map[string]int
	waitFor(t, 60*time.Second, "later events committed in Kafka", func() bool {
		counts = committedCounts(t, c.cfg.Kafka.Brokers, c.topic)
		return len(counts) >= len(c.w.committed)
	})
	noDuplicates(t, counts, "after the refusal")
	if counts[refused.ids[0].String()] != 0 {
		t.Fatal("the refused event is visible to read_committed")
	}
	if len(counts) != len(c.w.committed) {
		t.Fatalf("%d distinct events in Kafka, want %d", len(counts), len(c.w.committed))
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestEOSOnlyTheRefusedRecordsOfABatchAreSetAside: in exactly-once mode a
// backlog of two keys of one partition (so their records travel in the
// same batches) holds records older than the topic accepts and newer ones,
// in one Kafka transaction. The broker refuses the batch naming the old
// records: exactly those land in outbox_rejected, and the newer ones commit
// in the same session, in commit order, each once for read_committed
// readers.
func TestEOSOnlyTheRefusedRecordsOfABatchAreSetAside(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.ExactlyOnce = true
	db := connect(t, url)
	topic := cfg.TopicPrefix + "orders"
	keys := sameFirstPartition(cfg.TopicPartitions)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	first := uuid.New()
	insertEvent(t, db, first, keys[0], 100)
	waitFor(t, 30*time.Second, "the first event committed in Kafka", func() bool { return len(committedCounts(t, env.Brokers, topic)) == 1 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	alterTopic(t, env.Brokers, topic, "message.timestamp.before.max.ms", "10000")
	old := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for i, id := range old {
		insertEvent(t, db, id, keys[i%2], 100)
	}
	time.Sleep(11 * time.Second) // their commit times are now older than the topic accepts
	fresh := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for i, id := range fresh {
		insertEvent(t, db, id, keys[(i+1)%2], 100)
	}
	r = startRelay(t, cfg)
	var counts map[string]int
	waitFor(t, 30*time.Second, "the fresh events committed in Kafka", func() bool {
		counts = committedCounts(t, env.Brokers, topic)
		return counts[fresh[0].String()] > 0 && counts[fresh[1].String()] > 0 && counts[fresh[2].String()] > 0
	})
	noDuplicates(t, counts, "after the refusals")
	for _, id := range old {
		if counts[id.String()] != 0 {
			t.Errorf("refused event %s is visible to read_committed", id)
		}
		if reason := rejectedReason(t, db, id); !strings.Contains(reason, "timestamp") {
			t.Errorf("old event %s: reason %q, want the broker's timestamp refusal", id, reason)
		}
	}
	for _, id := range append(fresh, first) {
		if reason := rejectedReason(t, db, id); reason != "" {
			t.Errorf("innocent event %s set aside: %s", id, reason)
		}
	}
	p := fmt.Sprint(kafka.PartitionForKey([]byte(keys[0]), cfg.TopicPartitions))
	if got, want := committedByPartition(t, env.Brokers, topic)[p], append([]uuid.UUID{first}, fresh...); !slices.Equal(got, want) {
		t.Errorf("partition %s holds %v, want %v", p, got, want)
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Errorf("%v sessions failed: the refusal restarted the session", n)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// sameFirstPartition is two keys that map to the same partition of a topic
// of n partitions.
func sameFirstPartition(n int32) []string {
	want := kafka.PartitionForKey([]byte("k1"), n)
	for i := 2; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if kafka.PartitionForKey([]byte(k), n) == want {
			return []string{"k1", k}
		}
	}
}

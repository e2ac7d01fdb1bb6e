package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/dlq"
	"github.com/eventforge/eventforge/worker/sqlhandler"
)

// Results of eventforge_worker_events_total.
const (
	resultApplied   = "applied"
	resultDuplicate = "duplicate"
	resultDLQ       = "dlq"
)

func TestRunnerDuplicateDelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	f.insertOrders(t, "o-1", "o-2")
	e1, e2 := f.orderEvent("o-1"), f.orderEvent("o-2")
	produce(t, f.brokers, e1, e2, e1) // e1 delivered twice
	r := start(t, f.config(), f.pool, counting)
	waitFor(t, 30*time.Second, "3 events handled", func() bool {
		return r.events(f.topic, resultApplied)+r.events(f.topic, resultDuplicate) == 3
	})
	if a, d := r.events(f.topic, resultApplied), r.events(f.topic, resultDuplicate); a != 2 || d != 1 {
		t.Errorf("applied %d, duplicates %d; want 2 and 1", a, d)
	}
	if n := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1 AND status = 'processed'`); n != 2 {
		t.Errorf("%d orders applied exactly once, want 2", n)
	}
	if err := r.Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestRunnerCrashAfterCommitBeforeOffset stops the Runner right after the
// inbox transaction commits, before the offset is marked: the next Runner
// of the group gets the event again and finds it in the inbox.
func TestRunnerCrashAfterCommitBeforeOffset(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.insertOrders(t, "o-1", "o-2")
	e1, e2 := f.orderEvent("o-1"), f.orderEvent("o-2")
	produce(t, f.brokers, e1, e2)

	cfg := f.config()
	cfg.BatchSize = 1
	worker.SetAfterCommit(&cfg, func(evs []worker.Event) error {
		if evs[0].ID == e2.ID {
			return errCrash
		}
		return nil
	})
	first := start(t, cfg, f.pool, counting)
	select {
	case err := <-first.done:
		if !errors.Is(err, errCrash) {
			t.Fatalf("first runner ended with %v, want the crash", err)
		}
		first.once.Do(func() { first.err = err })
	case <-time.After(30 * time.Second):
		t.Fatal("first runner did not crash")
	}
	if n := f.count(t, `SELECT amount FROM orders WHERE id = 'o-2'`); n != 1 {
		t.Fatalf("o-2 applied %d times before the crash, want 1", n)
	}
	if off := committed(t, f.brokers, f.group, f.topic, 0); off > 1 {
		t.Fatalf("committed offset %d covers the event whose offset was never marked", off)
	}

	second := start(t, f.config(), f.pool, counting)
	waitFor(t, 30*time.Second, "the crashed event redelivered", func() bool {
		return second.events(f.topic, resultDuplicate) >= 1
	})
	waitFor(t, 10*time.Second, "offset 2 committed", func() bool {
		return committed(t, f.brokers, f.group, f.topic, 0) == 2
	})
	if a := second.events(f.topic, resultApplied); a != 0 {
		t.Errorf("second runner applied %d events, want 0", a)
	}
	if n := f.count(t, `SELECT sum(amount) FROM orders`); n != 2 {
		t.Errorf("effects %d, want 2 (one per order)", n)
	}
}

// TestRunnerMissingOrder: the demo handler's failure for a missing order is
// retried, then dead-lettered with the contract's headers; the offset moves
// only after the dead letter's ack; once the order exists, dlq replay
// applies the event once.
func TestRunnerMissingOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	h := sqlCounting(t, f)
	f.insertOrders(t, "present")
	missing := f.orderEvent("missing")
	present := f.orderEvent("present")
	produce(t, f.brokers, missing, present)
	partition := partitionOf(t, f, missing)

	cfg := f.config()
	reached := make(chan *sarama.ConsumerMessage, 1)
	release := make(chan struct{})
	worker.SetBeforeDeadLetter(&cfg, func(m *sarama.ConsumerMessage) {
		reached <- m
		<-release
	})
	r := start(t, cfg, f.pool, h)
	var m *sarama.ConsumerMessage
	select {
	case m = <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("missing order was not dead-lettered")
	}
	if got := r.metric("eventforge_worker_retries_total", "topic", f.topic); got != float64(cfg.MaxAttempts-1) {
		t.Errorf("retries = %v, want %d", got, cfg.MaxAttempts-1)
	}
	// While the dead letter is not acked, the offset stays put, well past
	// several commit intervals.
	time.Sleep(5 * cfg.CommitInterval)
	if off := committed(t, f.brokers, f.group, f.topic, partition); off > m.Offset {
		t.Fatalf("offset committed to %d before the dead letter of offset %d was acked", off, m.Offset)
	}
	if ls := deadLetters(t, f.brokers, f.topic); len(ls) != 0 {
		t.Fatalf("dead letter visible before it was sent: %+v", ls)
	}
	close(release)
	waitFor(t, 10*time.Second, "offset past the dead-lettered event", func() bool {
		return committed(t, f.brokers, f.group, f.topic, partition) > m.Offset
	})
	ls := deadLetters(t, f.brokers, f.topic)
	if len(ls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(ls))
	}
	l := ls[0]
	if l.EventID != missing.ID.String() || l.Attempts != cfg.MaxAttempts || l.OriginalTopic != f.topic ||
		l.OriginalPartition != partition || l.OriginalOffset != m.Offset || l.Consumer != f.group ||
		!strings.Contains(l.Error, "expected at least 1") || string(l.Key) != "missing" || l.Partition != partition {
		t.Errorf("dead letter = %+v", l)
	}
	if r.events(f.topic, resultDLQ) != 1 || r.events(f.topic, resultApplied) != 1 {
		t.Errorf("dlq %d applied %d, want 1 and 1", r.events(f.topic, resultDLQ), r.events(f.topic, resultApplied))
	}

	// Replay with the binary, as an operator would, after creating the order.
	f.insertOrders(t, "missing")
	out := runBinary(t, f, "dlq", "replay", "--topic", dlq.Topic(f.topic), "--event-id", missing.ID.String())
	if !strings.Contains(out, "1 replayed") {
		t.Errorf("replay said %q", out)
	}
	waitFor(t, 30*time.Second, "replayed event applied", func() bool {
		return f.count(t, `SELECT amount FROM orders WHERE id = 'missing'`) == 1
	})
	// Replaying it again is absorbed by the inbox.
	runBinary(t, f, "dlq", "replay", "--topic", dlq.Topic(f.topic), "--all")
	waitFor(t, 30*time.Second, "second replay seen as a duplicate", func() bool { return r.events(f.topic, resultDuplicate) == 1 })
	if n := f.count(t, `SELECT amount FROM orders WHERE id = 'missing'`); n != 1 {
		t.Errorf("replayed event applied %d times", n)
	}
	if n := f.count(t, `SELECT count(*) FROM processed_events WHERE event_id = $1`, missing.ID); n != 1 {
		t.Errorf("%d inbox rows for the replayed event", n)
	}
	list := runBinary(t, f, "dlq", "list", "--topic", dlq.Topic(f.topic))
	if !strings.Contains(list, missing.ID.String()) || !strings.Contains(list, "1 dead letters") {
		t.Errorf("dlq list:\n%s", list)
	}
}

// TestRunnerMalformed: records that are not events are dead-lettered at
// once with the reason, and the worker carries on.
func TestRunnerMalformed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.insertOrders(t, "good")
	good := f.orderEvent("good")
	goodMsg, err := outbox.Message(good, "")
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(kv ...string) []sarama.RecordHeader {
		var hs []sarama.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, sarama.RecordHeader{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
		}
		return hs
	}
	produceRaw(t, f.brokers,
		&sarama.ProducerMessage{Topic: f.topic, Key: sarama.StringEncoder("a"), Value: sarama.StringEncoder(`{}`), Headers: hdr("event_type", "order.created")},
		&sarama.ProducerMessage{Topic: f.topic, Key: sarama.StringEncoder("b"), Value: sarama.StringEncoder(`{}`), Headers: hdr("event_id", "42")},
		&sarama.ProducerMessage{Topic: f.topic, Key: sarama.StringEncoder("c"), Value: sarama.StringEncoder(`not json`), Headers: hdr("event_id", uuid.NewString())},
		&sarama.ProducerMessage{Topic: f.topic, Value: sarama.StringEncoder(`{}`)},
		goodMsg,
	)
	r := start(t, f.config(), f.pool, counting)
	waitFor(t, 30*time.Second, "the good event applied", func() bool { return r.events(f.topic, resultApplied) == 1 })
	ls := deadLetters(t, f.brokers, f.topic)
	wantReasons := []string{"no event_id header", `"42" is not a UUID`, "payload is not JSON", "no event_id header"}
	if len(ls) != len(wantReasons) {
		t.Fatalf("%d dead letters, want %d: %+v", len(ls), len(wantReasons), ls)
	}
	for i, want := range wantReasons {
		if !strings.Contains(ls[i].Error, want) || ls[i].Attempts != 1 || ls[i].OriginalOffset != int64(i) {
			t.Errorf("dead letter %d = %q attempts %d offset %d, want reason %q", i, ls[i].Error, ls[i].Attempts, ls[i].OriginalOffset, want)
		}
	}
	if ls[3].Key != nil {
		t.Errorf("keyless record gained key %q", ls[3].Key)
	}
	if r.events(f.topic, resultDLQ) != 4 {
		t.Errorf("dlq count %d", r.events(f.topic, resultDLQ))
	}
	select {
	case err := <-r.done:
		t.Fatalf("runner stopped: %v", err)
	default:
	}
	// Still consuming.
	f.insertOrders(t, "later")
	produce(t, f.brokers, f.orderEvent("later"))
	waitFor(t, 30*time.Second, "a later event applied", func() bool { return r.events(f.topic, resultApplied) == 2 })
}

// TestRunnerBatchPoison: a poison event in the middle of a batch is
// dead-lettered alone; its neighbours are applied once, after one fallback.
// Every handler kind: Go (event by event), SQL set-based (batch_sql) and
// SQL pipelined (a statement per event).
func TestRunnerBatchPoison(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"go", "sql", "sql-pipelined"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, 1)
			var evs []*outbox.Event
			var ids []string
			for i := range 40 {
				id := fmt.Sprintf("o-%02d", i)
				if i != 17 {
					ids = append(ids, id)
				}
				evs = append(evs, f.orderEvent(id))
			}
			f.insertOrders(t, ids...)
			produce(t, f.brokers, evs...) // o-17 has no order: poison
			cfg := f.config()
			cfg.BatchSize = 100
			var h worker.Handler = counting
			switch kind {
			case "sql":
				h = sqlCounting(t, f)
			case "sql-pipelined":
				h = sqlCountingPipelined(t, f)
			}
			r := start(t, cfg, f.pool, h)
			waitFor(t, 30*time.Second, "offset 40 committed", func() bool {
				return committed(t, f.brokers, f.group, f.topic, 0) == 40
			})
			if n := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); n != 39 {
				t.Errorf("%d orders applied once, want 39", n)
			}
			if n := f.count(t, `SELECT count(*) FROM orders WHERE amount > 1`); n != 0 {
				t.Errorf("%d orders applied more than once", n)
			}
			ls := deadLetters(t, f.brokers, f.topic)
			if len(ls) != 1 || ls[0].EventID != evs[17].ID.String() {
				t.Fatalf("dead letters %+v, want only o-17", ls)
			}
			if r.events(f.topic, resultApplied) != 39 || r.events(f.topic, resultDLQ) != 1 {
				t.Errorf("applied %d dlq %d", r.events(f.topic, resultApplied), r.events(f.topic, resultDLQ))
			}
			// The batch path really ran and fell back once for the poisoned run.
			if fb := r.metric("eventforge_worker_batch_fallbacks_total"); fb < 1 {
				t.Errorf("batch fallbacks = %v, want at least 1", fb)
			}
			if n := r.metric("eventforge_worker_apply_seconds", "mode", "batch"); n < 1 {
				t.Errorf("%v batch transactions, want at least 1", n)
			}
		})
	}
}

// partitionOf is the partition the relay would put e in.
func partitionOf(t testing.TB, f *fixture, e *outbox.Event) int32 {
	t.Helper()
	client, err := sarama.NewClient(f.brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ps, err := client.Partitions(f.topic)
	if err != nil {
		t.Fatal(err)
	}
	return kafka.PartitionForKey([]byte(e.AggregateID), int32(len(ps)))
}

// runBinary runs eventforge with the fixture's brokers and database.
func runBinary(t testing.TB, f *fixture, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append(cmd.Environ(), "EVENTFORGE_KAFKA_BROKERS="+strings.Join(f.brokers, ","), "EVENTFORGE_PG_URL="+f.dbURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("eventforge %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sqlCounting is the demo handler of deploy/handlers/orders.yaml plus an
// effect counter, compiled against the fixture's database.
func sqlCounting(t testing.TB, f *fixture) worker.Handler {
	t.Helper()
	spec, err := sqlhandler.Parse([]byte(countingYAML))
	if err != nil {
		t.Fatal(err)
	}
	return compileSQL(t, f, spec)
}

// sqlCountingPipelined is sqlCounting without its batch_sql: each event's
// statement is pipelined.
func sqlCountingPipelined(t testing.TB, f *fixture) worker.Handler {
	t.Helper()
	spec, err := sqlhandler.Parse([]byte(countingYAML))
	if err != nil {
		t.Fatal(err)
	}
	for typ, st := range spec.Handlers {
		st.BatchSQL = ""
		spec.Handlers[typ] = st
	}
	return compileSQL(t, f, spec)
}

func compileSQL(t testing.TB, f *fixture, spec *sqlhandler.Spec) worker.Handler {
	t.Helper()
	conn, err := f.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	h, err := sqlhandler.New(context.Background(), conn.Conn().PgConn(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const countingYAML = `
unknown: skip
handlers:
  order.created:
    sql: UPDATE orders SET status = 'processed', amount = amount + 1, updated_at = now() WHERE id = $1
    expect_rows: 1
    batch_sql: >
      UPDATE orders o SET status = 'processed', amount = amount + 1, updated_at = now()
      FROM unnest($1::text[]) AS e(id) WHERE o.id = e.id RETURNING e.id
`

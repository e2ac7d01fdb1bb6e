package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/dlq"
)

// fixture is one integration test's private database and topic on the
// shared services.
type fixture struct {
	env     *testenv.Env
	dbURL   string
	pool    *pgxpool.Pool
	topic   string
	group   string
	brokers []string
}

func newFixture(t *testing.T, partitions int32) *fixture {
	t.Helper()
	env := testenv.Shared(t)
	f := fixtureOn(t, env, env.NewDatabase(t), env.Brokers)
	createTopic(t, f.brokers, f.topic, partitions)
	return f
}

// fixtureOn is a fixture on the database at dbURL and the brokers given,
// without its topic.
func fixtureOn(t *testing.T, env *testenv.Env, dbURL string, brokers []string) *fixture {
	t.Helper()
	f := &fixture{env: env, dbURL: dbURL, brokers: brokers,
		topic: testenv.UniqueName("wt"), group: testenv.UniqueName("wg")}
	testenv.DeleteTopicsWithPrefixAtCleanup(t, brokers, f.topic) // the topic and its dead-letter topic
	pool, err := pgxpool.New(context.Background(), f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.pool = pool
	return f
}

func createTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	testenv.CreateTopic(t, brokers, topic, partitions)
}

// exec runs SQL on the fixture's database.
func (f *fixture) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (f *fixture) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// orderEvent is the order.created event of an order on the fixture's topic.
func (f *fixture) orderEvent(orderID string) *outbox.Event {
	return &outbox.Event{ID: uuid.New(), AggregateType: f.topic, AggregateID: orderID, EventType: "order.created",
		Payload: []byte(fmt.Sprintf(`{"id":%q}`, orderID)), CommitTime: time.Now()}
}

// produce sends the contract's records of evs, partitioned as the relay
// does, and waits for the acks.
func produce(t testing.TB, brokers []string, evs ...*outbox.Event) {
	t.Helper()
	msgs := make([]*sarama.ProducerMessage, len(evs))
	for i, e := range evs {
		m, err := outbox.Message(e, "")
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = m
	}
	produceRaw(t, brokers, msgs...)
}

// produceRaw sends records as they are (for malformed ones), keyless records
// to partition 0.
func produceRaw(t testing.TB, brokers []string, msgs ...*sarama.ProducerMessage) {
	t.Helper()
	sc := kafka.Config{Brokers: brokers}.IdempotentProducer(kafka.ProducerOptions{})
	sc.Producer.Partitioner = func(string) sarama.Partitioner { return keyOrZero{} }
	p, err := sarama.NewSyncProducer(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for start := 0; start < len(msgs); start += 5000 {
		if err := p.SendMessages(msgs[start:min(start+5000, len(msgs))]); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

type keyOrZero struct{}

func (keyOrZero) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	if m.Key == nil {
		return 0, nil
	}
	return kafka.JavaPartitioner{}.Partition(m, n)
}
func (keyOrZero) RequiresConsistency() bool { return true }

// testConfig is a Config for the fixture with quick retries and commits.
func (f *fixture) config() worker.Config {
	return worker.Config{
		Kafka:          kafka.Config{Brokers: f.brokers, ClientID: "worker-test"},
		Group:          f.group,
		Topics:         []string{f.topic},
		MaxAttempts:    3,
		RetryBackoff:   20 * time.Millisecond,
		MaxBackoff:     200 * time.Millisecond,
		CommitInterval: 100 * time.Millisecond,
		SessionTimeout: 6 * time.Second,
		Logger:         testLogger(),
	}
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("EVENTFORGE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// running is a Runner started by a test.
type running struct {
	*worker.Runner
	consumer string
	reg      *prometheus.Registry
	cancel   context.CancelFunc
	done     chan error
	once     sync.Once
	err      error
}

// start runs a Runner until the test ends (or stop).
func start(t *testing.T, cfg worker.Config, db worker.DB, h worker.Handler) *running {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r, err := worker.New(cfg, db, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	consumer := cfg.Consumer
	if consumer == "" {
		consumer = cfg.Group
	}
	rr := &running{Runner: r, consumer: consumer, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		if err := rr.stop(); err != nil && !errors.Is(err, errCrash) {
			t.Errorf("runner: %v", err)
		}
	})
	return rr
}

// stop ends the Runner gracefully and returns what Run returned.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(60 * time.Second):
			r.err = errors.New("runner did not stop within 60s")
		}
	})
	return r.err
}

// exited waits for the Runner to return by itself and returns what Run
// returned; the test's cleanup then expects nothing more of it.
func (r *running) exited(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.once.Do(r.cancel)
		return err
	case <-time.After(timeout):
		t.Fatalf("runner still running after %s", timeout)
		return nil
	}
}

// errCrash is what test hooks return to stop a Runner as a crash would.
var errCrash = errors.New("simulated crash")

// events is eventforge_worker_events_total of the runner for topic and result.
func (r *running) events(topic, result string) int {
	return int(r.metric("eventforge_worker_events_total", "consumer", r.consumer, "topic", topic, "result", result))
}

// metric is the value of the runner's series name with the given label
// pairs (a counter or gauge, or a histogram's sample count); 0 when absent.
func (r *running) metric(name string, labels ...string) float64 {
	mfs, err := r.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// handledOnce waits until topic's single event is applied or
// dead-lettered and returns which (resultApplied or resultDLQ).
func (r *running) handledOnce(t testing.TB, topic string, timeout time.Duration) string {
	t.Helper()
	waitFor(t, timeout, "the event handled", func() bool {
		return r.events(topic, resultApplied)+r.events(topic, resultDLQ) == 1
	})
	if r.events(topic, resultDLQ) != 0 {
		return resultDLQ
	}
	return resultApplied
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}

// committed is the group's committed offset of a partition (-1: none).
func committed(t testing.TB, brokers []string, group, topic string, partition int32) int64 {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {partition}})
	if err != nil {
		t.Fatalf("list offsets of %s: %v", group, err)
	}
	b := resp.GetBlock(topic, partition)
	if b == nil {
		return -1
	}
	return b.Offset
}

// deadLetters reads the fixture topic's dead-letter topic.
func deadLetters(t testing.TB, brokers []string, topic string) []dlq.Letter {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ls, err := dlq.ReadAll(context.Background(), client, dlq.Topic(topic))
	if errors.Is(err, dlq.ErrNoTopic) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// counting is a handler with a visible effect per application: it adds 1 to
// the order's amount and marks it processed, and fails (0 rows) when the
// order is missing.
var counting = worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
	tag, err := tx.Exec(ctx, `UPDATE orders SET amount = amount + 1, status = 'processed', updated_at = now() WHERE id = $1`, ev.AggregateID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("order %q not found", ev.AggregateID)
	}
	return nil
})

// insertOrders creates orders with amount 0 and status created.
func (f *fixture) insertOrders(t testing.TB, ids ...string) {
	t.Helper()
	rows := make([][]any, len(ids))
	for i, id := range ids {
		rows[i] = []any{id, "created", int64(0)}
	}
	_, err := f.pool.CopyFrom(context.Background(), pgx.Identifier{"orders"}, []string{"id", "status", "amount"}, pgx.CopyFromRows(rows))
	if err != nil {
		t.Fatalf("insert orders: %v", err)
	}
}

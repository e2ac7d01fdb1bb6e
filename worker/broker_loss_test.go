package worker_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/outbox"
	"github.com/eventforge/eventforge/internal/testenv"
	"github.com/eventforge/eventforge/worker"
)

// frozenLeaderBound is how soon after a broker freezes the worker must
// apply, on every partition, events that Kafka took after the freeze.
const frozenLeaderBound = 15 * time.Second

// TestFrozenLeaderWorkerResumes freezes (SIGSTOP) the broker that leads
// most partitions of a 3-node cluster while events are produced to every
// partition and a worker applies them: on every partition the worker
// applies events acknowledged after the freeze within frozenLeaderBound of
// it, and every acknowledged event is applied exactly once.
//
// The worker does not meet the bound yet: its consumer group waits at least
// 5 s per request (a join is held for the group's initial rebalance delay),
// so a frozen leader costs about 20 s, and in one run of two the group lost
// its generation and resumed only when the broker was thawed (31 s). The
// test runs only with EVENTFORGE_TEST_WORKER_BROKER_LOSS=1 until it does.
func TestFrozenLeaderWorkerResumes(t *testing.T) {
	if os.Getenv("EVENTFORGE_TEST_WORKER_BROKER_LOSS") == "" {
		t.Skip("known gap: a frozen leader costs a worker about 20 s (set EVENTFORGE_TEST_WORKER_BROKER_LOSS=1 to measure)")
	}
	env := testenv.Shared(t)
	kc := testenv.StartKafkaCluster(t, 3)
	f := fixtureOn(t, env, env.NewDatabase(t), kc.Brokers())
	pool := f.pool
	admin, err := sarama.NewClusterAdmin(f.brokers, kafka.Config{Brokers: f.brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(f.topic, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 3}, false); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	applied := map[string]time.Time{} // event id -> when applied
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		mu.Lock()
		applied[ev.ID.String()] = time.Now()
		mu.Unlock()
		return nil
	})
	cfg := f.config()
	cfg.BatchSize = 1
	start(t, cfg, pool, h)

	p := newPacedProducer(t, f)
	waitFor(t, 60*time.Second, "events applied on every partition", func() bool { return p.appliedOnAll(&mu, applied) })
	leader := kc.BusiestLeader(t, f.topic)
	kc.Freeze(t, leader)
	frozen := time.Now()
	time.Sleep(frozenLeaderBound + 5*time.Second)
	kc.Thaw(t, leader)
	acked := p.stop()
	waitFor(t, 60*time.Second, "every acknowledged event applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range acked {
			if _, ok := applied[id]; !ok {
				return false
			}
		}
		return true
	})
	if n := f.count(t, "SELECT count(*) FROM processed_events"); n != len(applied) {
		t.Errorf("%d inbox rows for %d events applied", n, len(applied))
	}
	resumed, produced := map[int32]time.Duration{}, map[int32]time.Duration{}
	mu.Lock()
	for id, a := range acked {
		if a.at.Before(frozen) {
			continue
		}
		if d := applied[id].Sub(frozen); resumed[a.partition] == 0 || d < resumed[a.partition] {
			resumed[a.partition] = d
		}
		if d := a.at.Sub(frozen); produced[a.partition] == 0 || d < produced[a.partition] {
			produced[a.partition] = d
		}
	}
	mu.Unlock()
	t.Logf("froze broker %d; by partition, first event acknowledged after the freeze: %v; applied: %v", leader, produced, resumed)
	for part := range int32(6) {
		if d, ok := resumed[part]; !ok || d > frozenLeaderBound {
			t.Errorf("partition %d: events applied again %v after the freeze (any: %v), want within %s", part, d, ok, frozenLeaderBound)
		}
	}
}

// ack is where and when the broker acknowledged an event.
type ack struct {
	partition int32
	at        time.Time
}

// pacedProducer sends an event to every partition every 50ms until stop.
type pacedProducer struct {
	mu    sync.Mutex
	acked map[string]ack
	prod  sarama.AsyncProducer
	done  chan struct{}
	wg    sync.WaitGroup
}

func newPacedProducer(t *testing.T, f *fixture) *pacedProducer {
	t.Helper()
	sc := kafka.Config{Brokers: f.brokers}.IdempotentProducer(kafka.ProducerOptions{})
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewAsyncProducer(f.brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	p := &pacedProducer{acked: map[string]ack{}, prod: prod, done: make(chan struct{})}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		for m := range prod.Successes() {
			p.mu.Lock()
			p.acked[m.Metadata.(string)] = ack{partition: m.Partition, at: time.Now()}
			p.mu.Unlock()
		}
	}()
	go func() {
		defer p.wg.Done()
		for err := range prod.Errors() {
			t.Errorf("produce: %v", err)
		}
	}()
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				prod.AsyncClose()
				return
			case <-tick.C:
			}
			for part := range int32(6) {
				ev := f.orderEvent("o")
				m, err := outbox.Message(ev, "")
				if err != nil {
					t.Error(err)
					return
				}
				m.Partition, m.Metadata = part, ev.ID.String()
				prod.Input() <- m
			}
		}
	}()
	return p
}

// stop ends the production and returns the acknowledged events.
func (p *pacedProducer) stop() map[string]ack {
	close(p.done)
	p.wg.Wait()
	return p.acked
}

func (p *pacedProducer) appliedOnAll(mu *sync.Mutex, applied map[string]time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	seen := map[int32]bool{}
	for id, a := range p.acked {
		if _, ok := applied[id]; ok {
			seen[a.partition] = true
		}
	}
	return len(seen) == 6
}

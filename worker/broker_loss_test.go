package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	relayproduce "github.com/eventforge/eventforge/cdc/produce"
	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
)

// frozenLeaderBound is how soon after a broker freezes the worker must
// apply, on every partition, events that Kafka took after the freeze:
// Kafka fences a silent broker after about 9 s and elects new leaders, and
// the worker, whose partitions never go back to a leader that does not
// answer, must follow within a few seconds (docs/operations.md).
const frozenLeaderBound = 15 * time.Second

// TestFrozenLeaderWorkerResumes freezes (SIGSTOP) a broker of a 3-node
// cluster that leads partitions of the topic, the group's coordinator when
// it leads any (a frozen coordinator holds the group's heartbeats and
// commits too), while events are produced to every partition and a worker
// applies them: on every partition the worker applies events acknowledged
// after the freeze within frozenLeaderBound of it, and every acknowledged
// event takes effect exactly once.
func TestFrozenLeaderWorkerResumes(t *testing.T) {
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

	f.exec(t, "CREATE TABLE effects (event_id uuid NOT NULL)") // no key: a second effect would be a second row
	var mu sync.Mutex
	applied := map[string]time.Time{} // event id -> when applied
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", ev.ID); err != nil {
			return err
		}
		mu.Lock()
		applied[ev.ID.String()] = time.Now()
		mu.Unlock()
		return nil
	})
	cfg := f.config()
	cfg.BatchSize = 1
	start(t, cfg, pool, h)

	p := newPacedProducer(t, f)
	waitFor(t, 60*time.Second, "events applied on every partition", func() bool { return p.appliedOnAll(&mu, applied, time.Time{}) })
	leader := frozenCandidate(t, kc, f.group, f.topic)
	elected := kc.Elections(t, f.topic, leader)
	kc.Freeze(t, leader)
	frozen := time.Now()
	for end := frozen.Add(frozenLeaderBound + 2*time.Second); time.Now().Before(end) && !p.appliedOnAll(&mu, applied, frozen); {
		time.Sleep(100 * time.Millisecond)
	}
	kc.Thaw(t, leader)
	acked := p.stop(t)
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
	if n, d := f.count(t, "SELECT count(*) FROM effects"), f.count(t, "SELECT count(DISTINCT event_id) FROM effects"); n != d || d < len(acked) {
		t.Errorf("%d effects of %d events, %d acknowledged: want each acknowledged event's effect once", n, d, len(acked))
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
	moved := map[int32]time.Duration{}
	for p, at := range elected() {
		moved[p] = at.Sub(frozen)
	}
	t.Logf("froze broker %d; by partition, new leader named after the freeze: %v; first event acknowledged after it: %v; applied: %v",
		leader, moved, produced, resumed)
	for part := range int32(6) {
		if d, ok := resumed[part]; !ok || d > frozenLeaderBound {
			t.Errorf("partition %d: events applied again %v after the freeze (any: %v), want within %s", part, d, ok, frozenLeaderBound)
		}
	}
}

// frozenCandidate is the node id of the group's coordinator when it leads
// partitions of topic, else that of the broker leading most of them.
func frozenCandidate(t *testing.T, kc *testenv.KafkaCluster, group, topic string) int {
	t.Helper()
	client, err := sarama.NewClient(kc.Brokers(), kafka.Config{Brokers: kc.Brokers()}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	coord, err := client.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if l, err := client.Leader(topic, p); err == nil && l.ID() == coord.ID() {
			t.Logf("freezing broker %d: the group's coordinator and leader of partition %d", coord.ID(), p)
			return int(coord.ID())
		}
	}
	id := kc.BusiestLeader(t, topic)
	t.Logf("freezing broker %d: the busiest leader (the coordinator, %d, leads no partition)", id, coord.ID())
	return id
}

// ack is where and when the broker acknowledged an event.
type ack struct {
	partition int32
	at        time.Time
}

// pacedProducer sends an event to every partition every 50ms until stop,
// on the relay's produce engine, which moves a frozen leader's partitions
// to their new leader as soon as a broker names it: the test measures the
// worker, not a producer still waiting on the frozen broker.
type pacedProducer struct {
	mu            sync.Mutex
	acked         map[string]ack
	sent, settled int // records given to the producer; acknowledged or failed
	client        sarama.Client
	in            chan *relayproduce.Record
	done, fed     chan struct{}
	ran           chan error
	eng           *relayproduce.Engine[*relayproduce.Record]
}

func newPacedProducer(t *testing.T, f *fixture) *pacedProducer {
	t.Helper()
	sc := kafka.Config{Brokers: f.brokers}.Base()
	client, err := sarama.NewClient(f.brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	p := &pacedProducer{acked: map[string]ack{}, client: client, in: make(chan *relayproduce.Record),
		done: make(chan struct{}), fed: make(chan struct{}), ran: make(chan error, 1)}
	cfg := relayproduce.FromSarama(sc, 1<<20)
	cfg.MaxAttempts = 1000 // a partition whose replicas wait for the frozen one keeps timing out until Kafka fences it
	hooks := relayproduce.Hooks{
		Admit:     func(context.Context, *relayproduce.Record) (bool, error) { return true, nil },
		Delivered: func(r *relayproduce.Record) { p.settle(r, true) },
		Reject: func(_ context.Context, r *relayproduce.Record) error {
			t.Errorf("record refused: %s", r.Reason)
			p.settle(r, false)
			return nil
		},
		TooLarge: func(_ context.Context, _ *relayproduce.Record, err error) (string, error) { return "", err },
		Failed:   func(*relayproduce.Record, error) {},
		Fatal:    func(_ *relayproduce.Record, err error) error { return err },
	}
	// A new cluster's transaction coordinator may still be loading: the
	// relay starts a new session then, the test tries again.
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		p.eng, err = relayproduce.New(t.Context(), cfg, client, hooks, func(r *relayproduce.Record) *relayproduce.Record { return r }, nil)
		if err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil {
		_ = client.Close()
		t.Fatal(err)
	}
	go func() { p.ran <- p.eng.Run(t.Context(), p.in, true) }()
	go p.feed(t, f, partitionKeys(6))
	return p
}

// partitionKeys is, for each of n partitions, an order id that the
// relay's partitioner puts there.
func partitionKeys(n int32) []string {
	keys := make([]string, n)
	for i, found := 0, int32(0); found < n; i++ {
		k := fmt.Sprintf("o-%d", i)
		if p := kafka.PartitionForKey([]byte(k), n); keys[p] == "" {
			keys[p] = k
			found++
		}
	}
	return keys
}

// feed sends an event to every partition every 50ms until stop.
func (p *pacedProducer) feed(t *testing.T, f *fixture, keys []string) {
	defer close(p.fed)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		for _, key := range keys {
			ev := f.orderEvent(key)
			m, err := outbox.Message(ev, "")
			if err != nil {
				t.Error(err)
				return
			}
			m.Metadata = ev.ID.String()
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
			p.in <- &relayproduce.Record{Msg: m, Size: m.ByteSize(2)}
		}
	}
}

// settle records r's outcome.
func (p *pacedProducer) settle(r *relayproduce.Record, acked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if acked {
		p.acked[r.Msg.Metadata.(string)] = ack{partition: r.Msg.Partition, at: time.Now()}
	}
	p.settled++
}

// stop ends the production once every record sent is settled and returns
// the acknowledged events.
func (p *pacedProducer) stop(t *testing.T) map[string]ack {
	close(p.done)
	<-p.fed
	close(p.in)
	select {
	case err := <-p.ran:
		if err != nil {
			t.Errorf("produce: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("the producer did not settle its records within 60s")
	}
	_ = p.client.Close()
	p.eng.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.settled != p.sent {
		t.Errorf("%d records settled of %d sent", p.settled, p.sent)
	}
	return p.acked
}

// appliedOnAll tells whether, on every partition, an event acknowledged
// after since has been applied.
func (p *pacedProducer) appliedOnAll(mu *sync.Mutex, applied map[string]time.Time, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	seen := map[int32]bool{}
	for id, a := range p.acked {
		if _, ok := applied[id]; ok && a.at.After(since) {
			seen[a.partition] = true
		}
	}
	return len(seen) == 6
}

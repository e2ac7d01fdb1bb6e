package produce

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// kafkaEngine is a transactional engine on a real broker: what it
// delivered, and a hook run before each commit.
type kafkaEngine struct {
	eng        *Engine[*Record]
	mu         sync.Mutex
	delivered  []string
	committing func()
}

func newKafkaEngine(ctx context.Context, t *testing.T, brokers []string, id string, committing func()) (*kafkaEngine, error) {
	t.Helper()
	sc := kafka.Config{Brokers: brokers}.Base()
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	k := &kafkaEngine{committing: committing}
	hooks := Hooks{
		Admit: func(context.Context, *Record) (bool, error) { return true, nil },
		Delivered: func(r *Record) {
			v, _ := r.Msg.Value.Encode()
			k.mu.Lock()
			k.delivered = append(k.delivered, string(v))
			k.mu.Unlock()
		},
		Reject:     func(context.Context, *Record) error { return errors.New("unexpected rejection") },
		TooLarge:   func(context.Context, *Record, error) (string, error) { return "", errors.New("unexpected too large") },
		Failed:     func(*Record, error) {},
		Fatal:      func(_ *Record, err error) error { return err },
		Committing: committing,
	}
	cfg := Config{MaxGenerationBytes: 1 << 20, Version: sc.Version, TransactionalID: id, TransactionTimeout: 30 * time.Second}
	k.eng, err = New(ctx, cfg, client, hooks, func(r *Record) *Record { return r }, nil)
	return k, err
}

// records are the records of values on topic (keys k0, k1, ... so they
// spread over partitions), ended by a Commit record.
func records(topic string, values ...string) []*Record {
	var out []*Record
	for i, v := range values {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k" + string(rune('0'+i))), Value: sarama.StringEncoder(v)}
		out = append(out, &Record{Msg: msg, Size: msg.ByteSize(2)})
	}
	msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("position"), Value: sarama.StringEncoder("position")}
	return append(out, &Record{Msg: msg, Size: msg.ByteSize(2), Commit: true})
}

func (k *kafkaEngine) run(ctx context.Context, recs []*Record) error {
	in := make(chan *Record, len(recs))
	for _, r := range recs {
		in <- r
	}
	close(in)
	return k.eng.Run(ctx, in, true)
}

// TestTransactionalEngineFencedBySecondProducer: producer A has a
// transaction's records in Kafka and is about to commit when producer B of
// the same transactional id starts. B's start fences A and aborts A's
// transaction: A's commit fails as fenced, A delivers nothing, and a
// read_committed reader sees B's records only.
func TestTransactionalEngineFencedBySecondProducer(t *testing.T) {
	env := testenv.Shared(t)
	topic := newTopic(t, env.Brokers, "fence", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := testenv.UniqueName("eventforge-fence")

	reached, release := make(chan struct{}), make(chan struct{})
	a, err := newKafkaEngine(ctx, t, env.Brokers, id, func() { close(reached); <-release })
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() { aDone <- a.run(ctx, records(topic, "a1", "a2", "a3")) }()
	select {
	case <-reached:
	case err := <-aDone:
		t.Fatalf("producer A ended before its commit: %v", err)
	}

	b, err := newKafkaEngine(ctx, t, env.Brokers, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-aDone; !errors.Is(err, ErrFenced) {
		t.Fatalf("producer A's run = %v, want ErrFenced", err)
	}
	if len(a.delivered) != 0 {
		t.Fatalf("fenced producer A delivered %v", a.delivered)
	}
	if err := b.run(ctx, records(topic, "b1", "b2")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"b1", "b2", "position"}; !slices.Equal(sorted(b.delivered), want) {
		t.Fatalf("producer B delivered %v, want %v", b.delivered, want)
	}
	if got, want := readCommitted(ctx, t, env.Brokers, topic), []string{"b1", "b2", "position"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %v, want %v", got, want)
	}
}

// TestReadStableLeavesAnOpenTransactionOut: with one producer's records
// committed and another's transaction open (records in the log, about to
// commit), kafka.ReadStable returns the committed records at once, while
// kafka.ReadCommitted waits for the open transaction to be decided and
// then sees it too.
func TestReadStableLeavesAnOpenTransactionOut(t *testing.T) {
	env := testenv.Shared(t)
	topic := newTopic(t, env.Brokers, "stable", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	done, err := newKafkaEngine(ctx, t, env.Brokers, testenv.UniqueName("eventforge-stable"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := done.run(ctx, records(topic, "c1", "c2")); err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	open, err := newKafkaEngine(ctx, t, env.Brokers, testenv.UniqueName("eventforge-stable"), func() { close(reached); <-release })
	if err != nil {
		t.Fatal(err)
	}
	openDone := make(chan error, 1)
	go func() { openDone <- open.run(ctx, records(topic, "o1")) }()
	<-reached

	committed := []string{"c1", "c2", "position"}
	if got := readPartition(ctx, t, env.Brokers, topic, kafka.ReadStable); !slices.Equal(got, committed) {
		t.Fatalf("ReadStable with a transaction open = %v, want %v", got, committed)
	}
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if err := readErr(short, env.Brokers, topic, kafka.ReadCommitted); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadCommitted with a transaction open = %v, want it waiting until its deadline", err)
	}
	close(release)
	if err := <-openDone; err != nil {
		t.Fatal(err)
	}
	if got, want := readPartition(ctx, t, env.Brokers, topic, kafka.ReadCommitted), []string{"c1", "c2", "o1", "position", "position"}; !slices.Equal(got, want) {
		t.Fatalf("ReadCommitted after the commit = %v, want %v", got, want)
	}
}

// readPartition is the sorted values read from topic's partition 0.
func readPartition(ctx context.Context, t *testing.T, brokers []string, topic string, read kafka.ReadFunc) []string {
	t.Helper()
	var out []string
	if err := readValues(ctx, brokers, topic, read, &out); err != nil {
		t.Fatal(err)
	}
	return sorted(out)
}

// readErr is the error of reading topic's partition 0.
func readErr(ctx context.Context, brokers []string, topic string, read kafka.ReadFunc) error {
	var out []string
	return readValues(ctx, brokers, topic, read, &out)
}

func readValues(ctx context.Context, brokers []string, topic string, read kafka.ReadFunc, out *[]string) error {
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		return err
	}
	defer client.Close()
	return read(ctx, client, topic, 0, func(_ int64, r *sarama.Record) error {
		*out = append(*out, string(r.Value))
		return nil
	})
}

// newTopic creates a topic of partitions named after prefix, deleted when
// the test ends.
func newTopic(t *testing.T, brokers []string, prefix string, partitions int32) string {
	t.Helper()
	topic := testenv.UniqueName(prefix)
	testenv.CreateTopic(t, brokers, topic, partitions)
	testenv.DeleteTopicsAtCleanup(t, brokers, topic)
	return topic
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// readCommitted is the values of topic's committed records, sorted.
func readCommitted(ctx context.Context, t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range parts {
		err := kafka.ReadCommitted(ctx, client, topic, p, func(_ int64, r *sarama.Record) error {
			out = append(out, string(r.Value))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return sorted(out)
}

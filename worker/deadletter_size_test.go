package worker_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/dlq"
)

// TestRunnerDeadLettersLargeRecord: a failing record larger than Kafka's
// default limit (2 MiB, on a topic that allows 4 MiB) is dead-lettered, to
// a dead-letter topic created with its source's limit, and the partition
// moves on; before, the producer's 1 MiB limit refused it for ever.
func TestRunnerDeadLettersLargeRecord(t *testing.T) {
	t.Parallel()
	const sourceLimit = 4 << 20
	f := newFixture(t, 1) // its topic stays unused
	f.topic = testenv.UniqueName("wt")
	testenv.DeleteTopicsWithPrefixAtCleanup(t, f.brokers, f.topic)
	admin, err := sarama.NewClusterAdmin(f.brokers, kafka.Config{Brokers: f.brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	limit := strconv.Itoa(sourceLimit)
	if err := admin.CreateTopic(f.topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{kafka.TopicMaxMessageBytes: &limit}}, false); err != nil {
		t.Fatal(err)
	}

	big := f.orderEvent("big")
	big.Payload = []byte(`{"blob":"` + strings.Repeat("x", 2<<20) + `"}`)
	small := f.orderEvent("small")
	msgs := make([]*sarama.ProducerMessage, 0, 2)
	for _, e := range []*outbox.Event{big, small} {
		m, err := outbox.Message(e, "")
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	sc := kafka.Config{Brokers: f.brokers}.IdempotentProducer(kafka.ProducerOptions{})
	sc.Producer.MaxMessageBytes = sourceLimit
	p, err := sarama.NewSyncProducer(f.brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("produce: %v", err)
	}
	p.Close()

	reject := worker.HandlerFunc(func(_ context.Context, _ pgx.Tx, ev worker.Event) error {
		if ev.AggregateID == "big" {
			return worker.Permanent(errors.New("too big to handle"))
		}
		return worker.ErrSkip
	})
	r := start(t, f.config(), f.pool, reject)
	waitFor(t, 30*time.Second, "both records handled", func() bool {
		return r.events(f.topic, resultDLQ) == 1 && r.events(f.topic, "skipped") == 1
	})
	ls := deadLetters(t, f.brokers, f.topic)
	if len(ls) != 1 || ls[0].EventID != big.ID.String() || len(ls[0].Value) != len(msgsValue(t, msgs[0])) {
		t.Fatalf("dead letters %d, want the 2 MiB one", len(ls))
	}
	got, err := kafka.MaxMessageBytes(admin, dlq.Topic(f.topic))
	if err != nil {
		t.Fatal(err)
	}
	if got < sourceLimit {
		t.Errorf("dead-letter topic created with max.message.bytes %d, below its source's %d", got, sourceLimit)
	}
}

func msgsValue(t testing.TB, m *sarama.ProducerMessage) []byte {
	t.Helper()
	b, err := m.Value.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

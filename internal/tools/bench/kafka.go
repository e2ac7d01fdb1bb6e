package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// topicPartitions is the relay's default for topics it creates.
const topicPartitions = 12

// broker is the bench's admin view of Kafka: it creates fresh topics and
// deletes them when the run ends, so a million-event topic does not stay.
type broker struct {
	cfg     kafka.Config
	client  sarama.Client
	admin   sarama.ClusterAdmin
	mu      sync.Mutex
	created []string
}

func newBroker(brokers []string) (*broker, error) {
	cfg := kafka.Config{Brokers: brokers, ClientID: "eventforge-bench"}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(brokers, cfg.Base())
	if err != nil {
		return nil, fmt.Errorf("connect to Kafka: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("connect to Kafka: %w", err)
	}
	return &broker{cfg: cfg, client: client, admin: admin}, nil
}

// createTopic creates topic with the relay's default partitioning and waits
// until its metadata answers.
func (b *broker) createTopic(ctx context.Context, topic string) error {
	err := b.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: topicPartitions, ReplicationFactor: 1}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	b.mu.Lock()
	b.created = append(b.created, topic)
	b.mu.Unlock()
	return poll(ctx, time.Minute, 100*time.Millisecond, "topic "+topic, func() (bool, error) {
		if err := b.client.RefreshMetadata(topic); err != nil {
			return false, nil
		}
		ps, err := b.client.Partitions(topic)
		return err == nil && len(ps) == topicPartitions, nil
	})
}

// records counts the records in topic: high minus low watermarks. Reading
// them right after the relay created the topic can meet a stale leader
// ("not the leader for some partition"): it is retried for a while.
func (b *broker) records(ctx context.Context, topic string) (int64, error) {
	var n int64
	var last error
	err := poll(ctx, 30*time.Second, 200*time.Millisecond, "offsets of "+topic, func() (bool, error) {
		n, last = b.countRecords(topic)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return 0, last
	}
	return n, err
}

// committedRecords counts the records of topic a read_committed consumer
// sees: an exactly-once relay's log also holds transaction markers (and the
// records of aborted transactions), which an offset difference would count.
func (b *broker) committedRecords(ctx context.Context, topic string) (int64, error) {
	ps, err := b.partitions(topic)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range ps {
		err := kafka.ReadCommitted(ctx, b.client, topic, p, func(int64, *sarama.Record) error { n++; return nil })
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (b *broker) countRecords(topic string) (int64, error) {
	ps, err := b.partitions(topic)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range ps {
		hi, err1 := b.client.GetOffset(topic, p, sarama.OffsetNewest)
		lo, err2 := b.client.GetOffset(topic, p, sarama.OffsetOldest)
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("read offsets of %s: %w", topic, err)
		}
		n += hi - lo
	}
	return n, nil
}

// close deletes the topics the bench created (and their dead-letter topics).
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	existing, _ := b.admin.ListTopics()
	for _, t := range b.created {
		for _, name := range []string{t, t + outbox.DLQSuffix} {
			if _, ok := existing[name]; ok {
				_ = b.admin.DeleteTopic(name)
			}
		}
	}
	b.admin.Close() // closes the client too
}

// prefill produces n order.created events in the contract's format (the
// relay's outbox.Message) for orders o-<tag>-1..n to topic with an async
// producer, and waits for every ack.
func (b *broker) prefill(ctx context.Context, topic, tag string, n int) error {
	sc := b.cfg.Base()
	sc.Producer.RequiredAcks = sarama.WaitForLocal
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Partitioner = kafka.NewJavaPartitioner
	sc.Producer.Compression = sarama.CompressionLZ4
	sc.Producer.Flush.Bytes = 1 << 20
	sc.Producer.Flush.Frequency = 5 * time.Millisecond
	sc.ChannelBufferSize = 4096
	p, err := sarama.NewAsyncProducer(b.cfg.Brokers, sc)
	if err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	acked := make(chan error, 1)
	go func() {
		var first error
		for i := 0; i < n; i++ {
			select {
			case <-p.Successes():
			case e := <-p.Errors():
				if first == nil {
					first = e.Err
				}
			}
		}
		acked <- first
	}()
	now := time.Now()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("o-%s-%d", tag, i)
		e := &outbox.Event{
			ID: uuid.New(), AggregateType: "orders", AggregateID: id, EventType: "order.created",
			Payload:    fmt.Appendf(nil, `{"id":%q,"customer":"c%d","amount":%d,"currency":"EUR"}`, id, i%97, i%10000+1),
			CommitTime: now,
		}
		msg, err := outbox.Message(e, "")
		if err != nil {
			p.AsyncClose()
			return err
		}
		msg.Topic = topic
		select {
		case p.Input() <- msg:
		case <-ctx.Done():
			p.AsyncClose()
			return ctx.Err()
		}
	}
	err = <-acked
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// partitions are topic's partitions, from freshly read metadata.
func (b *broker) partitions(topic string) ([]int32, error) {
	if err := b.client.RefreshMetadata(topic); err != nil {
		return nil, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	ps, err := b.client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("read partitions of %s: %w", topic, err)
	}
	return ps, nil
}

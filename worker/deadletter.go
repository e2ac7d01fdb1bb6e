package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/failpoint"
	"github.com/eventforge/eventforge/worker/dlq"
)

// samePartitioner puts a dead letter in the partition of its original
// (carried in the message's Partition field), modulo the partition count, so
// each dead-letter partition keeps its source partition's order.
type samePartitioner struct{}

func newSamePartitioner(string) sarama.Partitioner { return samePartitioner{} }

func (samePartitioner) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	if m.Partition < 0 {
		return 0, nil
	}
	return m.Partition % n, nil
}

func (samePartitioner) RequiresConsistency() bool { return true }

// deadLetterer produces dead letters and creates dead-letter topics.
type deadLetterer struct {
	client   sarama.Client
	admin    sarama.ClusterAdmin
	producer sarama.SyncProducer
	consumer string
	log      *slog.Logger

	mu      sync.Mutex
	ensured map[string]bool // dead-letter topics known to exist
}

// send produces the dead letter of m and returns once the broker acked it
// from all in-sync replicas.
func (d *deadLetterer) send(m *sarama.ConsumerMessage, info dlq.Info) error {
	if err := d.ensureTopic(m.Topic); err != nil {
		return err
	}
	info.Consumer = d.consumer
	// A SyncProducer hands over and waits for the ack in one call, so the
	// point sits just before it.
	failpoint.Hit(failpoint.WorkerAfterDLQProduceBeforeAck)
	if _, _, err := d.producer.SendMessage(dlq.Message(m, info)); err != nil {
		return fmt.Errorf("produce dead letter to %s: %w", dlq.Topic(m.Topic), err)
	}
	return nil
}

// ensureTopic creates the dead-letter topic of source when it is missing,
// with the partition count and replication factor of source.
func (d *deadLetterer) ensureTopic(source string) error {
	name := dlq.Topic(source)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ensured[name] {
		return nil
	}
	metas, err := d.admin.DescribeTopics([]string{name})
	if err != nil {
		return fmt.Errorf("describe topic %s: %w", name, err)
	}
	if len(metas) == 1 && errors.Is(metas[0].Err, sarama.ErrNoError) {
		d.ensured[name] = true
		return nil
	}
	detail, err := d.sourceDetail(source)
	if err != nil {
		return err
	}
	err = d.admin.CreateTopic(name, detail, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	if err := d.client.RefreshMetadata(name); err != nil {
		return fmt.Errorf("read metadata of %s: %w", name, err)
	}
	d.log.Info("created dead-letter topic", "topic", name, "partitions", detail.NumPartitions)
	d.ensured[name] = true
	return nil
}

func (d *deadLetterer) sourceDetail(source string) (*sarama.TopicDetail, error) {
	if err := d.client.RefreshMetadata(source); err != nil {
		return nil, fmt.Errorf("read metadata of %s: %w", source, err)
	}
	parts, err := d.client.Partitions(source)
	if err != nil || len(parts) == 0 {
		return nil, fmt.Errorf("list partitions of %s: %w", source, errors.Join(err, sarama.ErrUnknownTopicOrPartition))
	}
	replicas, err := d.client.Replicas(source, parts[0])
	if err != nil {
		return nil, fmt.Errorf("list replicas of %s: %w", source, err)
	}
	return &sarama.TopicDetail{NumPartitions: int32(len(parts)), ReplicationFactor: int16(max(1, len(replicas)))}, nil
}

// close closes the producer, then the admin and its client.
func (d *deadLetterer) close() error {
	return errors.Join(d.producer.Close(), d.admin.Close())
}

// newDeadLetterer connects the dead-letter producer.
func newDeadLetterer(cfg Config) (*deadLetterer, error) {
	client, err := sarama.NewClient(cfg.Kafka.Brokers, cfg.producerConfig())
	if err != nil {
		return nil, fmt.Errorf("connect dead-letter producer: %w", err)
	}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("create dead-letter producer: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = producer.Close()
		_ = client.Close()
		return nil, fmt.Errorf("create Kafka admin: %w", err)
	}
	return &deadLetterer{
		client: client, admin: admin, producer: producer,
		consumer: cfg.Consumer, log: cfg.Logger, ensured: map[string]bool{},
	}, nil
}

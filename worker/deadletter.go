package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/shared/kafka"
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

// deadLetterHeadroom is what a dead letter may weigh more than its original:
// the x-eventforge-* headers (the error text is cut at dlq.MaxErrorBytes)
// and the record overhead, with room to spare.
const deadLetterHeadroom = 64 << 10

// defaultMaxMessageBytes is Kafka's default max.message.bytes.
const defaultMaxMessageBytes = 1048588

// deadLetterer produces dead letters and creates dead-letter topics. A
// record is as large as its source topic's max.message.bytes allows, so the
// dead-letter topic and the producer are sized from the source topic:
// otherwise a large failing record could never be dead-lettered and its
// partition would stop for good.
type deadLetterer struct {
	cfg      Config
	client   sarama.Client // the admin's
	admin    sarama.ClusterAdmin
	consumer string
	log      *slog.Logger

	mu        sync.Mutex
	limits    map[string]int              // source topic → size limit of its dead letters, once its topic is ensured
	producers map[int]sarama.SyncProducer // by Producer.MaxMessageBytes
}

// send produces the dead letter of m and returns once the broker acked it
// from all in-sync replicas.
func (d *deadLetterer) send(m *sarama.ConsumerMessage, info dlq.Info) error {
	producer, err := d.producerFor(m.Topic)
	if err != nil {
		return err
	}
	info.Consumer = d.consumer
	// A SyncProducer hands over and waits for the ack in one call, so the
	// point sits just before it.
	failpoint.Hit(failpoint.WorkerAfterDLQProduceBeforeAck)
	if _, _, err := producer.SendMessage(dlq.Message(m, info)); err != nil {
		return fmt.Errorf("produce dead letter to %s: %w", dlq.Topic(m.Topic), err)
	}
	return nil
}

// producerFor ensures the dead-letter topic of source and returns a
// producer that accepts records up to its size limit.
func (d *deadLetterer) producerFor(source string) (sarama.SyncProducer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	limit, ok := d.limits[source]
	if !ok {
		var err error
		if limit, err = d.ensureTopic(source); err != nil {
			return nil, err
		}
		d.limits[source] = limit
	}
	if p := d.producers[limit]; p != nil {
		return p, nil
	}
	sc := d.cfg.producerConfig()
	sc.Producer.MaxMessageBytes = limit
	p, err := sarama.NewSyncProducer(d.cfg.Kafka.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("create dead-letter producer: %w", err)
	}
	d.producers[limit] = p
	return p, nil
}

// ensureTopic creates the dead-letter topic of source when it is missing,
// with the partition count and replication factor of source and room for
// its largest record, raises the limit of one that exists with less, and
// returns the limit.
func (d *deadLetterer) ensureTopic(source string) (int, error) {
	name := dlq.Topic(source)
	sourceLimit, err := kafka.MaxMessageBytes(d.admin, source)
	known := err == nil
	if !known {
		// Describing configurations may be denied (an ACL): the dead
		// letters then get the defaults, enough for records of default size.
		d.log.Warn("cannot read the record size limit of a topic; its dead-letter topic and producer keep the defaults",
			"topic", source, "error", err)
		sourceLimit = defaultMaxMessageBytes
	}
	limit := sourceLimit + deadLetterHeadroom
	metas, err := d.admin.DescribeTopics([]string{name})
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", name, err)
	}
	if len(metas) == 1 && errors.Is(metas[0].Err, sarama.ErrNoError) {
		if !known {
			return limit, nil
		}
		return d.raiseLimit(name, limit)
	}
	detail, err := d.sourceDetail(source)
	if err != nil {
		return 0, err
	}
	if known {
		value := strconv.Itoa(limit)
		detail.ConfigEntries = map[string]*string{kafka.TopicMaxMessageBytes: &value}
	}
	err = d.admin.CreateTopic(name, detail, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", name, err)
	}
	if err := d.client.RefreshMetadata(name); err != nil {
		return 0, fmt.Errorf("read metadata of %s: %w", name, err)
	}
	d.log.Info("created dead-letter topic", "topic", name, "partitions", detail.NumPartitions, kafka.TopicMaxMessageBytes, limit)
	return limit, nil
}

// raiseLimit makes the existing dead-letter topic name accept records of
// limit bytes when it accepts less (it may predate a raise of its source's
// limit). When that is not allowed, the topic's own limit is used: records
// above it cannot be dead-lettered until an operator raises it.
func (d *deadLetterer) raiseLimit(name string, limit int) (int, error) {
	current, err := kafka.MaxMessageBytes(d.admin, name)
	if err != nil {
		return 0, err
	}
	if current >= limit {
		return current, nil
	}
	value := strconv.Itoa(limit)
	err = d.admin.IncrementalAlterConfig(sarama.TopicResource, name, map[string]sarama.IncrementalAlterConfigsEntry{
		kafka.TopicMaxMessageBytes: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value},
	}, false)
	if err != nil {
		d.log.Warn("cannot raise the record size limit of a dead-letter topic below its source's; larger records cannot be dead-lettered",
			"topic", name, kafka.TopicMaxMessageBytes, current, "want", limit, "error", err)
		return current, nil
	}
	d.log.Info("raised the record size limit of a dead-letter topic to its source's", "topic", name, kafka.TopicMaxMessageBytes, limit)
	return limit, nil
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

// close closes the producers, then the admin and its client.
func (d *deadLetterer) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.producers {
		errs = append(errs, p.Close())
	}
	return errors.Join(append(errs, d.admin.Close())...)
}

// newDeadLetterer connects the Kafka admin of the dead-letter path; its
// producers connect on first use.
func newDeadLetterer(cfg Config) (*deadLetterer, error) {
	client, err := sarama.NewClient(cfg.Kafka.Brokers, cfg.producerConfig())
	if err != nil {
		return nil, fmt.Errorf("connect dead-letter producer: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("create Kafka admin: %w", err)
	}
	return &deadLetterer{
		cfg: cfg, client: client, admin: admin,
		consumer: cfg.Consumer, log: cfg.Logger,
		limits: map[string]int{}, producers: map[int]sarama.SyncProducer{},
	}, nil
}

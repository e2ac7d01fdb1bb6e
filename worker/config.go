package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/outbox"
)

// Defaults of Config; a zero field takes its default.
const (
	DefaultMaxAttempts    = 5
	DefaultRetryBackoff   = 200 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMaxRetryTime   = 2 * time.Minute
	DefaultBatchSize      = 500
	DefaultBatchBytes     = 1 << 20
	DefaultApplyTimeout   = 30 * time.Second
	DefaultCommitInterval = time.Second
	DefaultSessionTimeout = 10 * time.Second
)

// Config configures a Runner. Zero fields take the defaults above.
type Config struct {
	Kafka kafka.Config
	// Group is the Kafka consumer group; its members share the partitions.
	Group string
	// Consumer names this worker in processed_events (the inbox): events
	// are applied once per consumer. Defaults to Group.
	Consumer string
	// Topics to consume. Each topic T dead-letters to T.dlq.
	Topics []string

	// MaxAttempts bounds the attempts in all (the first included) before a
	// failing event is dead-lettered.
	MaxAttempts int
	// RetryBackoff is the first wait between attempts; each further wait
	// doubles, up to MaxBackoff, with jitter.
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	// MaxRetryTime bounds the time spent retrying one event; the time its
	// partition waits out a database outage does not count.
	MaxRetryTime time.Duration
	// BatchSize is the most messages of one partition applied in one
	// transaction. Batches take only what has already arrived, so they add
	// no latency. 1 applies one by one.
	BatchSize int
	// BatchBytes bounds a batch by the bytes of its records' keys and
	// values; a batch holds at least one record whatever its size.
	BatchBytes int
	// ApplyTimeout bounds one transaction.
	ApplyTimeout time.Duration
	// CommitInterval is how often marked offsets are committed to Kafka.
	CommitInterval time.Duration
	// SessionTimeout is how long the group waits for a silent member before
	// moving its partitions.
	SessionTimeout time.Duration

	Logger     *slog.Logger          // default: discard
	Registerer prometheus.Registerer // default: a private registry

	hooks hooks // test seams; zero in production
}

// hooks let tests stop the Runner at points a crash could hit.
type hooks struct {
	// afterCommit runs after an inbox transaction commits and before its
	// offsets are marked; an error stops the Runner there, as a crash would.
	afterCommit func(evs []Event) error
	// beforeDeadLetter runs before a dead letter is produced.
	beforeDeadLetter func(m *sarama.ConsumerMessage)
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Consumer == "" {
		c.Consumer = c.Group
	}
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	setDefault(&c.RetryBackoff, DefaultRetryBackoff)
	setDefault(&c.MaxBackoff, DefaultMaxBackoff)
	setDefault(&c.MaxRetryTime, DefaultMaxRetryTime)
	setDefault(&c.BatchSize, DefaultBatchSize)
	setDefault(&c.BatchBytes, DefaultBatchBytes)
	setDefault(&c.ApplyTimeout, DefaultApplyTimeout)
	setDefault(&c.CommitInterval, DefaultCommitInterval)
	setDefault(&c.SessionTimeout, DefaultSessionTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Check reports a configuration that cannot work once its zero fields take
// their defaults, as New would, without I/O: a command can refuse it before
// waiting for the database.
func (c Config) Check() error { return c.withDefaults().Validate() }

// Validate reports a configuration that cannot work. It checks the values
// as given, so call it on a Config with its defaults applied (New does).
func (c Config) Validate() error {
	if err := c.Kafka.Validate(); err != nil {
		return err
	}
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("no consumer group: set --group"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("no topics: set --topics"))
	}
	for _, t := range c.Topics {
		if t == "" || strings.ContainsAny(t, " ,") {
			errs = append(errs, fmt.Errorf("invalid topic name %q", t))
		}
		if strings.HasSuffix(t, outbox.DLQSuffix) {
			errs = append(errs, fmt.Errorf("topic %q is a dead-letter topic: consume the original topic, replay with dlq replay", t))
		}
	}
	errs = append(errs,
		positive("--max-attempts", c.MaxAttempts),
		positive("--batch-size", c.BatchSize),
		positive("--batch-bytes", c.BatchBytes),
		positive("--retry-backoff", c.RetryBackoff),
		positive("max backoff", c.MaxBackoff),
		positive("--max-retry-time", c.MaxRetryTime),
		positive("apply timeout", c.ApplyTimeout),
		positive("commit interval", c.CommitInterval),
		positive("session timeout", c.SessionTimeout),
	)
	if c.MaxBackoff < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("max backoff %s is below --retry-backoff %s", c.MaxBackoff, c.RetryBackoff))
	}
	return errors.Join(errs...)
}

func positive[T int | time.Duration](name string, v T) error {
	if v <= 0 {
		return fmt.Errorf("%s must be positive, got %v", name, v)
	}
	return nil
}

// consumerConfig is the sarama configuration of the consumer group.
func (c Config) consumerConfig() *sarama.Config {
	sc := c.Kafka.Base()
	// A worker never creates the topics it reads: the relay owns them, and
	// an auto-created topic would get the broker's default partition count.
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	// Offsets are committed by the Runner, only for marked messages, and
	// marked only after their transaction committed (docs/design.md#inbox).
	sc.Consumer.Offsets.AutoCommit.Enable = false
	sc.Consumer.Return.Errors = true
	// read_committed: records of aborted Kafka transactions (a relay in
	// exactly-once mode that crashed or was fenced) are never applied. For
	// records produced outside transactions it changes nothing.
	sc.Consumer.IsolationLevel = sarama.ReadCommitted
	// Eager sticky: every rebalance ends the session, which tells each claim
	// loop to finish its transaction and return, and keeps partitions where
	// they were when it can (fewer redeliveries).
	sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	sc.Consumer.Group.Session.Timeout = c.SessionTimeout
	sc.Consumer.Group.Heartbeat.Interval = c.SessionTimeout / 3
	sc.ChannelBufferSize = max(256, c.BatchSize)
	return sc
}

// producerConfig is the sarama configuration of the dead-letter producer:
// the idempotent producer (acks from all in-sync replicas), placing each
// dead letter in the partition of its original.
func (c Config) producerConfig() *sarama.Config {
	sc := c.Kafka.IdempotentProducer(kafka.ProducerOptions{})
	sc.Metadata.AllowAutoTopicCreation = false
	sc.Producer.Partitioner = newSamePartitioner
	// A SyncProducer has one record in flight: send it at once.
	sc.Producer.Flush.Frequency, sc.Producer.Flush.Bytes, sc.Producer.Flush.Messages = 0, 0, 0
	return sc
}

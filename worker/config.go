package worker

import (
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/fielderr"
	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker/kafkaconf"
)

// Defaults of Config; a zero field takes its default.
const (
	DefaultMaxAttempts    = 6
	DefaultRetryBackoff   = 200 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMaxRetryTime   = 2 * time.Minute
	DefaultBatchSize      = 500
	DefaultBatchBytes     = 1 << 20
	DefaultApplyTimeout   = 30 * time.Second
	DefaultCommitInterval = time.Second
	DefaultSessionTimeout = 10 * time.Second
	DefaultOutageEvents   = 3
)

// Config configures a Runner. Start from DefaultConfig, set the required
// fields (Kafka.Brokers, Group, Topics), then New validates it; a zero field
// takes its default (the constants above).
type Config struct {
	// Kafka is the brokers and their security. Required: Kafka.Brokers.
	Kafka kafkaconf.Config
	// Group is the Kafka consumer group; its members share the partitions.
	// Required.
	Group string
	// Consumer names this worker in processed_events (the inbox): events
	// are applied once per consumer. Default: Group.
	Consumer string
	// Topics to consume. Each topic T dead-letters to T.dlq. Required.
	Topics []string

	// MaxAttempts bounds the attempts in all (the first included) before a
	// failing event is dead-lettered. Default: DefaultMaxAttempts (6): with
	// the default backoff the retries span at least 3.1 s, more than the
	// 2 s a business row committed with the event may take to become
	// visible to the worker (docs/guarantees.md).
	MaxAttempts int
	// RetryBackoff is the first wait between attempts; each further wait
	// doubles, up to MaxBackoff, with jitter. Default: DefaultRetryBackoff
	// (200 ms).
	RetryBackoff time.Duration
	// MaxBackoff is the longest wait between attempts, at least
	// RetryBackoff. Default: DefaultMaxBackoff (30 s).
	MaxBackoff time.Duration
	// MaxRetryTime bounds the time spent retrying one event; the time its
	// partition waits out a database outage does not count. Default:
	// DefaultMaxRetryTime (2 min).
	MaxRetryTime time.Duration
	// BatchSize is the most messages of one partition applied in one
	// transaction. Batches take only what has already arrived, so they add
	// no latency. 1 applies one by one. Default: DefaultBatchSize (500).
	BatchSize int
	// BatchBytes bounds a batch by the bytes of its records' keys and
	// values; a batch holds at least one record whatever its size.
	// Default: DefaultBatchBytes (1 MiB).
	BatchBytes int
	// OutageEvents is how many consecutive distinct events of a partition
	// failing with the same cause, while the database works, make an
	// outage rather than poison: the partition then waits instead of
	// dead-lettering them. Default: DefaultOutageEvents (3).
	OutageEvents int
	// ProbeTimeout bounds the probe that asks the database, after a failed
	// apply, whether it is reachable, writable and has the inbox; a probe
	// that takes longer finds it unavailable. Default: DefaultProbeTimeout
	// (5 s).
	ProbeTimeout time.Duration
	// ApplyTimeout bounds one transaction. Default: DefaultApplyTimeout
	// (30 s).
	ApplyTimeout time.Duration
	// CommitInterval is how often marked offsets are committed to Kafka.
	// Default: DefaultCommitInterval (1 s).
	CommitInterval time.Duration
	// SessionTimeout is how long the group waits for a silent member before
	// moving its partitions. Default: DefaultSessionTimeout (10 s).
	SessionTimeout time.Duration

	// Logger receives the Runner's logs. Default: a logger that discards.
	Logger *slog.Logger
	// Registerer takes the Runner's metrics. Default: a private registry.
	Registerer prometheus.Registerer
	// ValueDecoder, when set, reads every record's value before the event
	// is parsed (schema registry values become JSON); see ValueDecoder.
	ValueDecoder ValueDecoder

	hooks hooks // test seams; zero in production
}

// hooks let tests stop the Runner at points a crash could hit.
type hooks struct {
	// afterCommit runs after an inbox transaction commits and before its
	// offsets are marked; an error stops the Runner there, as a crash would.
	afterCommit func(evs []Event) error
	// beforeDeadLetter runs before a dead letter is produced.
	beforeDeadLetter func(m *sarama.ConsumerMessage)
	// jitter replaces the backoff's random jitter, in [0, 1).
	jitter func() float64
}

// DefaultConfig returns a Config with every default set: a caller sets
// Kafka, Group and Topics (required) and changes what it needs, then New
// validates it. Consumer defaults to Group, Logger to a discarding logger
// and Registerer to a private registry, all set by New.
func DefaultConfig() Config { return Config{}.withDefaults().unsetDerived() }

// unsetDerived clears the defaults that New derives per call, so a
// DefaultConfig carries no shared logger, registry or consumer name.
func (c Config) unsetDerived() Config {
	c.Consumer, c.Logger, c.Registerer = "", nil, nil
	return c
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
	setDefault(&c.OutageEvents, DefaultOutageEvents)
	setDefault(&c.ProbeTimeout, DefaultProbeTimeout)
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

// Validate reports every problem of a configuration that cannot work, at
// once (errors.Join), each naming its field ("Config.Group: required"). It
// checks the values as given, so call it on a Config with its defaults
// applied (DefaultConfig; New applies them).
func (c Config) Validate() error {
	errs := []error{c.Kafka.Validate()}
	if c.Group == "" {
		errs = append(errs, fielderr.New("Config.Group", "required"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, fielderr.New("Config.Topics", "required"))
	}
	for _, t := range c.Topics {
		if t == "" || strings.ContainsAny(t, " ,") {
			errs = append(errs, fielderr.New("Config.Topics", "invalid topic name %q", t))
		}
		if strings.HasSuffix(t, outbox.DLQSuffix) {
			errs = append(errs, fielderr.New("Config.Topics", "topic %q is a dead-letter topic: consume the original topic, replay with dlq replay", t))
		}
	}
	errs = append(errs,
		positive("Config.MaxAttempts", c.MaxAttempts),
		positive("Config.BatchSize", c.BatchSize),
		positive("Config.BatchBytes", c.BatchBytes),
		positive("Config.RetryBackoff", c.RetryBackoff),
		positive("Config.MaxBackoff", c.MaxBackoff),
		positive("Config.MaxRetryTime", c.MaxRetryTime),
		positive("Config.ApplyTimeout", c.ApplyTimeout),
		positive("Config.CommitInterval", c.CommitInterval),
		positive("Config.SessionTimeout", c.SessionTimeout),
		positive("Config.OutageEvents", c.OutageEvents),
		positive("Config.ProbeTimeout", c.ProbeTimeout),
	)
	if c.MaxBackoff < c.RetryBackoff {
		errs = append(errs, fielderr.New("Config.MaxBackoff", "%s is below Config.RetryBackoff %s", c.MaxBackoff, c.RetryBackoff))
	}
	return errors.Join(errs...)
}

func positive[T int | time.Duration](field string, v T) error {
	if v <= 0 {
		return fielderr.New(field, "must be positive, got %v", v)
	}
	return nil
}

// consumerRetryBackoff is the pause before a partition whose fetch failed
// looks for its leader again.
const consumerRetryBackoff = 500 * time.Millisecond

// minGroupRequestTimeout is the least request timeout of the consumer
// group's connections. The group coordinator holds a join's response while
// the group forms: group.initial.rebalance.delay.ms (3 s by default) for a
// group with no member yet, which is every worker deployment's start. sarama
// has one read timeout for every request, so a shorter one would time the
// join out and retry it without end.
const minGroupRequestTimeout = 5 * time.Second

// groupRequestTimeout is the read timeout of the consumer group's
// connections: at least the request timeout and minGroupRequestTimeout, and
// long enough for a join to wait out the other members finishing their
// transaction in progress (up to ApplyTimeout, noticed within a heartbeat)
// before they rejoin. A join that timed out sooner would be sent again and
// time out again as long as members keep starting long batches, and a new
// worker would never get partitions.
func (c Config) groupRequestTimeout(request time.Duration) time.Duration {
	return max(request, minGroupRequestTimeout, c.ApplyTimeout+c.SessionTimeout/3+2*time.Second)
}

// coordinatorConfig is consumerConfig with the read timeout of
// groupRequestTimeout: the configuration of the client that talks to the
// group coordinator (groupClient).
func (c Config) coordinatorConfig() *sarama.Config {
	sc := c.consumerConfig()
	sc.Net.ReadTimeout = c.groupRequestTimeout(sc.Net.ReadTimeout)
	return sc
}

// consumerConfig is the sarama configuration of the consumer group's
// fetches and metadata. Its network timeouts are Config.Kafka.Timeouts: a
// fetch waits on a broker at most the request timeout, so a frozen
// leader's partitions move to their new leader soon after Kafka elected it
// (docs/operations.md#kafka-timeouts). Group coordination waits longer
// (coordinatorConfig).
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
	// A fetch that failed (a frozen leader's connection timed out) looks
	// for the partition's leader again after this pause, not sarama's 2 s:
	// the new leader is read as soon as Kafka has elected it.
	sc.Consumer.Retry.Backoff = consumerRetryBackoff
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

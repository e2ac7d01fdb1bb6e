// Package cdc is the relay: it reads committed outbox rows from a logical
// replication slot (pgoutput), produces them to Kafka with an idempotent
// producer, and confirms the slot only up to the end of the longest prefix of
// transactions whose every event the broker has acknowledged.
package cdc

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/backoff"
	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/outbox"
	"github.com/eventforge/eventforge/internal/pgconn"
)

// Defaults of Config, also the defaults of the `cdc run` flags.
const (
	DefaultSlot                   = "eventforge"
	DefaultPublication            = "eventforge_outbox"
	DefaultOutboxTable            = "public.outbox"
	DefaultTopicPartitions        = 12
	DefaultTopicReplicationFactor = -1 // the broker's default.replication.factor
	DefaultMaxInFlightEvents      = 20000
	DefaultMaxInFlightBytes       = 64 << 20
	DefaultHeartbeatInterval      = 10 * time.Second
	DefaultCompression            = "lz4"
	DefaultMaxMessageBytes        = 1000000
	DefaultShutdownTimeout        = 30 * time.Second
	DefaultTxnInterval            = 100 * time.Millisecond
	DefaultMetricsAddr            = "" // like worker and api: set it to serve /healthz, /readyz, /metrics
)

// eosProduceRetries bounds sarama's retries of a record in exactly-once
// mode.
const eosProduceRetries = 5

// maxStatusInterval caps the interval between standby status updates; the
// server's wal_sender_timeout/2 lowers it further (docs/design.md#status-cadence).
const maxStatusInterval = 10 * time.Second

// Config is everything the relay needs. Start from DefaultConfig; zero
// durations and sizes are replaced by their defaults.
type Config struct {
	PGURL       string
	Kafka       kafka.Config
	Slot        string // logical replication slot, created when missing
	Publication string // must exist (eventforge migrate creates it)
	OutboxTable string // schema.table the publication covers; Mapping.Table wins when set
	// Mapping names the outbox's table and columns and the record format;
	// zero: the contract's (outbox.DefaultMapping) on OutboxTable.
	Mapping outbox.Mapping

	TopicPrefix            string // prepended to aggregate_type
	TopicPartitions        int32  // for topics the relay creates
	TopicReplicationFactor int16  // for topics the relay creates; -1 (default): the broker's default.replication.factor
	// TopicMinInsyncReplicas is min.insync.replicas of topics the relay
	// creates; 0 (default) leaves the broker's default.
	TopicMinInsyncReplicas int
	CreateTopics           bool // false: events to a missing topic are rejected (after a bounded wait)

	// BackfillSince, when set, makes a relay that creates its slot first
	// publish the outbox rows created at or after it that the slot's
	// exported snapshot sees, then stream from the slot's consistent point.
	// Ignored when the slot exists. Default: zero (no backfill).
	BackfillSince time.Time
	// BackfillAll is BackfillSince for every row of the snapshot. Default false.
	BackfillAll bool

	MaxInFlightEvents int   // events produced but not yet acked
	MaxInFlightBytes  int64 // their encoded size

	HeartbeatInterval time.Duration // negative disables heartbeats
	// StatusInterval is the longest time between standby status updates;
	// zero means min(10s, wal_sender_timeout/2) as read from the server.
	StatusInterval time.Duration
	// ReceiveTimeout is how long the stream may hear nothing from the server
	// (neither data nor keepalive) before the connection is presumed dead
	// and the session reconnects; zero derives it: the longest of 3
	// heartbeat intervals, 3 status intervals and wal_sender_timeout, plus
	// 5s. Never below two status intervals.
	ReceiveTimeout time.Duration

	Compression     string        // none, gzip, snappy, lz4 or zstd
	FlushBytes      int           // producer batch target; 0: send when the connection is free
	FlushFrequency  time.Duration // producer linger; 0: none (see kafka.ProducerOptions)
	MaxMessageBytes int           // largest record produced; larger ones are rejected

	// KafkaProbeInterval is how often a streaming relay checks that a broker
	// answers (readiness turns false when none does); default 5s.
	KafkaProbeInterval time.Duration
	ShutdownTimeout    time.Duration // bound on waiting for in-flight acks at shutdown
	ReconnectMin       time.Duration // first backoff after a failed session
	ReconnectMax       time.Duration // cap of the doubling backoff
	StandbyRetry       time.Duration // how often a standby retries the slot
	SlotSampleInterval time.Duration // pg_replication_slots sampling for metrics and safety
	StateWriteInterval time.Duration // relay_state updates (throttled)

	// ExactlyOnce produces inside Kafka transactions and records the
	// relay's position in the same transactions, so a restarted relay
	// resends nothing a read_committed consumer has seen
	// (docs/design.md#exactly-once). Default false: at-least-once.
	ExactlyOnce bool
	// PositionTopic is the compacted topic of the exactly-once position;
	// default: TopicPrefix + "eventforge.positions".
	PositionTopic string
	// TxnInterval is the longest an exactly-once Kafka transaction stays
	// open to batch PostgreSQL transactions while more are queued (it
	// commits at once at a PostgreSQL commit when nothing is); default
	// 100ms.
	TxnInterval time.Duration
}

// DefaultConfig returns a Config with every default set; callers fill PGURL
// and Kafka.Brokers.
func DefaultConfig() Config {
	c := Config{
		Slot:                   DefaultSlot,
		Publication:            DefaultPublication,
		OutboxTable:            DefaultOutboxTable,
		TopicPartitions:        DefaultTopicPartitions,
		TopicReplicationFactor: DefaultTopicReplicationFactor,
		CreateTopics:           true,
		MaxInFlightEvents:      DefaultMaxInFlightEvents,
		MaxInFlightBytes:       DefaultMaxInFlightBytes,
		HeartbeatInterval:      DefaultHeartbeatInterval,
		Compression:            DefaultCompression,
		MaxMessageBytes:        DefaultMaxMessageBytes,
		ShutdownTimeout:        DefaultShutdownTimeout,
	}.withDefaults()
	c.Mapping.Table = "" // OutboxTable names it unless the caller sets it here
	return c
}

// withDefaults fills zero values.
func (c Config) withDefaults() Config {
	setStr := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setStr(&c.Slot, DefaultSlot)
	setStr(&c.Publication, DefaultPublication)
	setStr(&c.OutboxTable, DefaultOutboxTable)
	c.mappingDefaults()
	setStr(&c.Compression, DefaultCompression)
	if c.TopicPartitions == 0 {
		c.TopicPartitions = DefaultTopicPartitions
	}
	if c.TopicReplicationFactor == 0 {
		c.TopicReplicationFactor = DefaultTopicReplicationFactor
	}
	if c.MaxInFlightEvents == 0 {
		c.MaxInFlightEvents = DefaultMaxInFlightEvents
	}
	if c.MaxInFlightBytes == 0 {
		c.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	setDur(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	setDur(&c.ShutdownTimeout, DefaultShutdownTimeout)
	setDur(&c.KafkaProbeInterval, DefaultKafkaProbeInterval)
	setDur(&c.ReconnectMin, 500*time.Millisecond)
	setDur(&c.ReconnectMax, 30*time.Second)
	setDur(&c.StandbyRetry, 1500*time.Millisecond)
	setDur(&c.SlotSampleInterval, 15*time.Second)
	setDur(&c.StateWriteInterval, 5*time.Second)
	setDur(&c.TxnInterval, DefaultTxnInterval)
	return c
}

// slotName is what PostgreSQL accepts as a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Validate reports a configuration that cannot work, in one line that names
// the flag to fix. It never repeats a password.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.PGURL == "" {
		return errors.New("no PostgreSQL URL: set --pg-url or EVENTFORGE_PG_URL")
	}
	if _, err := pgconn.ParseConfig(c.PGURL); err != nil {
		return err
	}
	if err := c.Kafka.Validate(); err != nil {
		return err
	}
	if !slotName.MatchString(c.Slot) {
		return fmt.Errorf("invalid --slot %q: use 1-63 lower-case letters, digits or underscores", c.Slot)
	}
	if strings.ContainsAny(c.Publication, "'\"\x00") {
		return fmt.Errorf("invalid --publication %q", c.Publication)
	}
	if c.ExactlyOnce && (c.BackfillAll || !c.BackfillSince.IsZero()) {
		return errors.New("--exactly-once does not cover the snapshot backfill: run the backfill without it, then restart with --exactly-once")
	}
	if c.BackfillAll && !c.BackfillSince.IsZero() {
		return errors.New("--backfill-all and --backfill-since exclude each other")
	}
	if err := c.Mapping.Validate(); err != nil {
		return err
	}
	// An invalid prefix would set every event aside.
	if p := c.TopicPrefix; p != "" && TopicProblem(p+"x") != "" {
		return fmt.Errorf("invalid --topic-prefix %q: %s", p, TopicProblem(p+"x"))
	}
	switch {
	case c.TopicPartitions < 1:
		return fmt.Errorf("invalid --topic-partitions %d: must be at least 1", c.TopicPartitions)
	case c.TopicReplicationFactor < 1 && c.TopicReplicationFactor != -1:
		return fmt.Errorf("invalid --topic-replication-factor %d: must be -1 (the broker's default) or at least 1", c.TopicReplicationFactor)
	case c.TopicMinInsyncReplicas < 0:
		return fmt.Errorf("invalid --topic-min-insync-replicas %d: must be 0 (the broker's default) or at least 1", c.TopicMinInsyncReplicas)
	case c.TopicReplicationFactor > 0 && c.TopicMinInsyncReplicas > int(c.TopicReplicationFactor):
		return fmt.Errorf("--topic-min-insync-replicas %d exceeds --topic-replication-factor %d: no write could ever be acknowledged", c.TopicMinInsyncReplicas, c.TopicReplicationFactor)
	case c.MaxInFlightEvents < 1:
		return fmt.Errorf("invalid --max-in-flight-events %d: must be at least 1", c.MaxInFlightEvents)
	case c.MaxInFlightBytes < 1:
		return fmt.Errorf("invalid --max-in-flight-bytes %d: must be at least 1", c.MaxInFlightBytes)
	case c.MaxMessageBytes < 1024 || c.MaxMessageBytes >= int(sarama.MaxRequestSize):
		return fmt.Errorf("invalid --max-message-bytes %d: must be between 1024 and %d", c.MaxMessageBytes, sarama.MaxRequestSize-1)
	case c.KafkaProbeInterval < 0:
		return fmt.Errorf("invalid Kafka probe interval %s", c.KafkaProbeInterval)
	case c.ReceiveTimeout < 0:
		return fmt.Errorf("invalid --receive-timeout %s: must be 0 (derived) or positive", c.ReceiveTimeout)
	case c.StatusInterval < 0:
		return fmt.Errorf("invalid status interval %s", c.StatusInterval)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("invalid --shutdown-timeout %s", c.ShutdownTimeout)
	case c.TxnInterval < 0:
		return fmt.Errorf("invalid --txn-interval %s", c.TxnInterval)
	case c.PositionTopic != "" && TopicProblem(c.PositionTopic) != "":
		return fmt.Errorf("invalid --position-topic %q: %s", c.PositionTopic, TopicProblem(c.PositionTopic))
	case c.ReconnectMax < c.ReconnectMin:
		return fmt.Errorf("reconnect backoff cap %s is below its start %s", c.ReconnectMax, c.ReconnectMin)
	}
	if _, err := ParseCompression(c.Compression); err != nil {
		return err
	}
	return nil
}

// outboxTable splits the outbox table into schema and table.
func (c Config) outboxTable() (schema, table string, err error) {
	m := c.Mapping
	if m.Table == "" {
		m.Table = c.OutboxTable
	}
	return m.SplitTable()
}

// ParseCompression maps a --compression value to sarama's codec.
func ParseCompression(name string) (sarama.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return 0, fmt.Errorf("invalid --compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// producerConfig is the sarama configuration of one stream session.
func (c Config) producerConfig(maxMessageBytes int) (*sarama.Config, error) {
	codec, err := ParseCompression(c.Compression)
	if err != nil {
		return nil, err
	}
	sc := c.Kafka.IdempotentProducer(kafka.ProducerOptions{
		Compression:     codec,
		FlushBytes:      c.FlushBytes,
		FlushMaxWait:    c.FlushFrequency,
		MaxMessageBytes: maxMessageBytes,
	})
	// Topics are created by the relay with the configured partitions and
	// replication factor, never implicitly with the broker's defaults.
	sc.Metadata.AllowAutoTopicCreation = false
	// Bounded buffering between the relay and the broker connections; the
	// in-flight window bounds what is queued in all, so deeper channels
	// only mean fewer goroutine hand-offs per event.
	sc.ChannelBufferSize = 4096
	if c.ExactlyOnce {
		// A stable transactional id per slot: a restarted or competing
		// relay fences the previous producer (docs/design.md#exactly-once).
		sc.Producer.Transaction.ID = "eventforge-" + c.Slot
		sc.Producer.Transaction.Timeout = time.Minute
		// A record's error aborts the whole transaction, which the next
		// session sends again: no gap is possible, so a few retries are
		// enough, and a fenced producer gives up in seconds instead of
		// retrying for minutes.
		sc.Producer.Retry.Max = eosProduceRetries
		// A transaction begun right after a commit is refused with
		// CONCURRENT_TRANSACTIONS until the commit's markers are written:
		// retry in milliseconds, not sarama's 20-100 ms.
		sc.Producer.Transaction.Retry.BackoffFunc = func(retries, _ int) time.Duration {
			return backoff.Exponential(2*time.Millisecond, 100*time.Millisecond, retries)
		}
	}
	return sc, nil
}

// Package cdc is the relay: it reads committed outbox rows from a logical
// replication slot (pgoutput), produces them to Kafka with an idempotent
// producer, and confirms the slot only up to the end of the longest prefix of
// transactions whose every event the broker has acknowledged.
//
// Imports (floor: product, the relay): shared libraries, among them its
// own packages cdc/pgoutput (decoder), cdc/ack (confirmable position),
// cdc/produce (produce engine), cdc/topics, cdc/setaside (outbox_rejected),
// cdc/outboxscan (outbox rows by SQL), cdc/position (exactly-once
// position), cdc/eos (the exactly-once feeder) and cdc/backfill (a new
// slot's snapshot, published before its stream); never worker, api or the
// tools. The packages it plugs into declare what they need of it
// (backfill.Producer, eos.Items) and never import it.
package cdc

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
	"github.com/eventforge/eventforge/internal/shared/fielderr"
	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/pgconn"
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

// Exactly-once producer timings (see producerConfig): the linger when no
// flush setting is given, and the first retry of a transaction request the
// coordinator refused as concurrent.
const (
	eosLinger     = 200 * time.Microsecond
	eosRetryFirst = 250 * time.Microsecond
	// eosRetryFast caps the retries of the first eosFastRetries attempts:
	// a commit's markers are written within a few milliseconds, so
	// retrying every millisecond for a while finds the coordinator ready
	// soon after it is, where doubling would oversleep by as much as it
	// waited (tens of milliseconds on a brief broker stall).
	eosRetryFast   = time.Millisecond
	eosFastRetries = 20
	// eosRetryMost caps the retries after that: an unavailable
	// coordinator (a restarting broker) is waited for, not hammered.
	eosRetryMost = 100 * time.Millisecond
	// eosTxnRetries keeps the whole retry budget of a transaction request
	// at about 4 s, what sarama's 50 retries waited with the plain doubling,
	// before the session gives up and starts over.
	eosTxnRetries = 67
)

// eosTxnBackoff is the wait before retry n (0-based) of a transaction
// request: from eosRetryFirst doubling to eosRetryFast for eosFastRetries
// attempts, then doubling from there to eosRetryMost.
func eosTxnBackoff(n int) time.Duration {
	if n < eosFastRetries {
		return backoff.Exponential(eosRetryFirst, eosRetryFast, n)
	}
	return backoff.Exponential(eosRetryFast, eosRetryMost, n-eosFastRetries+1)
}

// eosProduceRetries bounds sarama's retries of a record under the
// exactly-once producer configuration.
const eosProduceRetries = 5

// maxStatusInterval caps the interval between standby status updates; the
// server's wal_sender_timeout/2 lowers it further (docs/design.md#status-cadence).
const maxStatusInterval = 10 * time.Second

// Config is everything the relay needs. Start from DefaultConfig, set the
// required fields (PGURL, Kafka.Brokers), then New validates it; a zero
// duration or size takes its default.
type Config struct {
	PGURL       string       // PostgreSQL URL; required
	Kafka       kafka.Config // brokers and security; Kafka.Brokers required
	Slot        string       // logical replication slot, created when missing; default DefaultSlot
	Publication string       // must exist (eventforge migrate creates it); default DefaultPublication
	OutboxTable string       // schema.table the publication covers; default DefaultOutboxTable; Mapping.Table wins when set
	// Mapping names the outbox's table and columns and the record format;
	// zero (default): the contract's (outbox.DefaultMapping) on OutboxTable.
	Mapping Mapping

	TopicPrefix            string // prepended to aggregate_type; default empty
	TopicPartitions        int32  // for topics the relay creates; default DefaultTopicPartitions (12)
	TopicReplicationFactor int16  // for topics the relay creates; -1 (default): the broker's default.replication.factor
	// TopicMinInsyncReplicas is min.insync.replicas of topics the relay
	// creates; 0 (default) leaves the broker's default.
	TopicMinInsyncReplicas int
	CreateTopics           bool // false: events to a missing topic are rejected (after a bounded wait); DefaultConfig: true

	// SlotFailover is SlotFailoverAuto (default: a failover slot on
	// PostgreSQL 17 and later), SlotFailoverOn (a failover slot; the relay
	// stops on an older server) or SlotFailoverOff. A failover slot is
	// synchronised to standbys, so the relay resumes from it on a promoted
	// standby; an existing slot is converted before streaming from it.
	SlotFailover string
	// StandbyURL, when set, is a standby of the primary, asked whether it
	// holds a synced copy of the slot in the failover protection check.
	// Default empty: the check reads the primary only.
	StandbyURL string
	// FailoverCheckInterval is how often the relay checks, on the primary,
	// that its slot would survive a promotion
	// (eventforge_slot_failover_ready); default 1 minute.
	FailoverCheckInterval time.Duration

	// BackfillSince, when set, makes a relay that creates its slot first
	// publish the outbox rows created at or after it that the slot's
	// exported snapshot sees, then stream from the slot's consistent point.
	// Ignored when the slot exists. Default: zero (no backfill).
	BackfillSince time.Time
	// BackfillAll is BackfillSince for every row of the snapshot. Default false.
	BackfillAll bool

	MaxInFlightEvents int   // events produced but not yet acked; default DefaultMaxInFlightEvents (20000)
	MaxInFlightBytes  int64 // their encoded size; default DefaultMaxInFlightBytes (64 MiB)

	HeartbeatInterval time.Duration // default DefaultHeartbeatInterval (10 s); negative disables heartbeats
	// StatusInterval is the longest time between standby status updates;
	// zero (default) means min(10s, wal_sender_timeout/2) as read from the server.
	StatusInterval time.Duration
	// ReceiveTimeout is how long the stream may hear nothing from the server
	// (neither data nor keepalive) before the connection is presumed dead
	// and the session reconnects; zero (default) derives it: the longest of
	// 3 heartbeat intervals, 3 status intervals and wal_sender_timeout, plus
	// 5s. Never below two status intervals.
	ReceiveTimeout time.Duration

	Compression     string        // none, gzip, snappy, lz4 or zstd; default DefaultCompression (lz4)
	FlushBytes      int           // generation size that ends a linger early; 0 (default): none (produce.Config.LingerBytes)
	FlushFrequency  time.Duration // linger of a partition's records before a smaller generation goes out; 0 (default): none (produce.Config.Linger)
	MaxMessageBytes int           // largest record produced, larger ones are rejected; default DefaultMaxMessageBytes

	// KafkaProbeInterval is how often a streaming relay checks that a broker
	// answers (readiness turns false when none does); default 5s.
	KafkaProbeInterval time.Duration
	ShutdownTimeout    time.Duration // bound on waiting for in-flight acks at shutdown; default DefaultShutdownTimeout (30 s)
	ReconnectMin       time.Duration // first backoff after a failed session; default 500 ms
	ReconnectMax       time.Duration // cap of the doubling backoff; default 30 s
	StandbyRetry       time.Duration // how often a standby retries the slot; default 1.5 s
	SlotSampleInterval time.Duration // pg_replication_slots sampling for metrics and safety; default 15 s
	StateWriteInterval time.Duration // relay_state updates (throttled); default 5 s

	// ExactlyOnce produces inside Kafka transactions and records the
	// relay's position in the same transactions, so a restarted relay
	// resends nothing a read_committed consumer has seen
	// (docs/design.md#exactly-once). Default false: at-least-once.
	ExactlyOnce bool
	// AllowedTopics, when set, are the only topics outbox rows may route
	// events to: exact names or patterns with * and ? (path.Match), matched
	// against the full topic name, TopicPrefix included. Events for other
	// topics go to outbox_rejected. Default empty: every topic.
	AllowedTopics []string
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
	setStr(&c.SlotFailover, SlotFailoverAuto)
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
	setDur(&c.FailoverCheckInterval, DefaultFailoverCheckInterval)
	return c
}

// slotName is what PostgreSQL accepts as a replication slot name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Validate reports every problem of a configuration that cannot work, at
// once (errors.Join), each naming its field ("Config.Slot: ..."); zero
// fields are checked with their defaults. It never repeats a password.
func (c Config) Validate() error {
	c = c.withDefaults()
	var p problems
	c.validateConnections(&p)
	c.validateSlot(&p)
	c.validateBackfill(&p)
	c.validateRecords(&p)
	c.validateTopics(&p)
	c.validateWindow(&p)
	c.validateTimings(&p)
	c.validateReserved(&p)
	if c.ReconnectMax < c.ReconnectMin {
		p.add("Config.ReconnectMax", "%s is below Config.ReconnectMin %s", c.ReconnectMax, c.ReconnectMin)
	}
	if _, err := ParseCompression(c.Compression); err != nil {
		p = append(p, fielderr.Wrap("Config.Compression", err))
	}
	return errors.Join(p...)
}

// problems collects what Validate finds, each error naming its field.
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, fielderr.New(field, format, args...))
}

// validateConnections checks how the relay reaches PostgreSQL and Kafka.
func (c Config) validateConnections(p *problems) {
	if c.PGURL == "" {
		p.add("Config.PGURL", "required")
	} else if _, err := pgconn.ParseConfig(c.PGURL); err != nil {
		*p = append(*p, fielderr.Wrap("Config.PGURL", err))
	}
	*p = append(*p, c.Kafka.Validate())
	*p = append(*p, c.validateFailover()...)
}

// validateSlot checks the names the relay gives PostgreSQL.
func (c Config) validateSlot(p *problems) {
	if !slotName.MatchString(c.Slot) {
		p.add("Config.Slot", "invalid slot name %q: use 1-63 lower-case letters, digits or underscores", c.Slot)
	}
	if strings.ContainsAny(c.Publication, "'\"\x00") {
		p.add("Config.Publication", "invalid publication name %q", c.Publication)
	}
}

// validateBackfill checks the snapshot backfill's settings against each
// other and against exactly-once mode.
func (c Config) validateBackfill(p *problems) {
	if c.ExactlyOnce && (c.BackfillAll || !c.BackfillSince.IsZero()) {
		p.add("", "Config.ExactlyOnce does not cover the snapshot backfill (Config.BackfillAll, Config.BackfillSince): run the backfill without it, then restart with Config.ExactlyOnce")
	}
	if c.BackfillAll && !c.BackfillSince.IsZero() {
		p.add("", "Config.BackfillAll and Config.BackfillSince exclude each other")
	}
}

// validateRecords checks how rows become records: the mapping and the
// topic prefix.
func (c Config) validateRecords(p *problems) {
	*p = append(*p, fielderr.Wrap("Config.Mapping", c.Mapping.Validate()))
	// An invalid prefix would set every event aside.
	if pre := c.TopicPrefix; pre != "" && outbox.TopicProblem(pre+"x") != "" {
		p.add("Config.TopicPrefix", "invalid prefix %q: %s", pre, outbox.TopicProblem(pre+"x"))
	}
}

// validateTopics checks the settings of the topics the relay creates.
func (c Config) validateTopics(p *problems) {
	if c.TopicPartitions < 1 {
		p.add("Config.TopicPartitions", "%d: must be at least 1", c.TopicPartitions)
	}
	if c.TopicReplicationFactor < 1 && c.TopicReplicationFactor != -1 {
		p.add("Config.TopicReplicationFactor", "%d: must be -1 (the broker's default) or at least 1", c.TopicReplicationFactor)
	}
	if c.TopicMinInsyncReplicas < 0 {
		p.add("Config.TopicMinInsyncReplicas", "%d: must be 0 (the broker's default) or at least 1", c.TopicMinInsyncReplicas)
	} else if c.TopicReplicationFactor > 0 && c.TopicMinInsyncReplicas > int(c.TopicReplicationFactor) {
		p.add("Config.TopicMinInsyncReplicas", "%d exceeds Config.TopicReplicationFactor %d: no write could ever be acknowledged", c.TopicMinInsyncReplicas, c.TopicReplicationFactor)
	}
}

// validateWindow checks the in-flight window and the record size limit.
func (c Config) validateWindow(p *problems) {
	if c.MaxInFlightEvents < 1 {
		p.add("Config.MaxInFlightEvents", "%d: must be at least 1", c.MaxInFlightEvents)
	}
	if c.MaxInFlightBytes < 1 {
		p.add("Config.MaxInFlightBytes", "%d: must be at least 1", c.MaxInFlightBytes)
	}
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes >= int(sarama.MaxRequestSize) {
		p.add("Config.MaxMessageBytes", "%d: must be between 1024 and %d", c.MaxMessageBytes, sarama.MaxRequestSize-1)
	}
}

// validateTimings checks the durations that may not be negative.
func (c Config) validateTimings(p *problems) {
	for _, d := range []struct {
		field string
		v     time.Duration
		what  string
	}{
		{"Config.KafkaProbeInterval", c.KafkaProbeInterval, "positive"},
		{"Config.ReceiveTimeout", c.ReceiveTimeout, "0 (derived) or positive"},
		{"Config.StatusInterval", c.StatusInterval, "0 (derived) or positive"},
		{"Config.ShutdownTimeout", c.ShutdownTimeout, "positive"},
		{"Config.TxnInterval", c.TxnInterval, "positive"},
	} {
		if d.v < 0 {
			p.add(d.field, "%s: must be %s", d.v, d.what)
		}
	}
}

// validateReserved checks the exactly-once position topic and the allowed
// topics.
func (c Config) validateReserved(p *problems) {
	if pt := c.PositionTopic; pt != "" && outbox.TopicProblem(pt) != "" {
		p.add("Config.PositionTopic", "invalid topic %q: %s", pt, outbox.TopicProblem(pt))
	}
	for _, msg := range allowedTopicsProblems(c.AllowedTopics) {
		p.add("Config.AllowedTopics", "%s", msg)
	}
}

// outboxTable splits the outbox table into schema and table.
func (c Config) outboxTable() (schema, table string, err error) {
	m := c.Mapping
	if m.Table == "" {
		m.Table = c.OutboxTable
	}
	return m.SplitTable()
}

// ParseCompression maps a compression name (Config.Compression) to sarama's codec.
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
	return 0, fmt.Errorf("invalid compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// ProducerConfig is the sarama configuration the relay's producer runs
// with (transactional with ExactlyOnce), after the defaults: for tools that
// measure a cluster as the relay meets it, such as eventforge bench's kafka
// stage. Its transactional id is the one of c.Slot's relay.
func (c Config) ProducerConfig() (*sarama.Config, error) {
	c = c.withDefaults()
	return c.producerConfig(c.MaxMessageBytes)
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
		// The relay's engine retries a batch a bounded number of times
		// itself; this bounds sarama's producer where a tool runs one
		// with this configuration (eventforge bench's kafka stage).
		sc.Producer.Retry.Max = eosProduceRetries
		// A transaction begun right after a commit is refused with
		// CONCURRENT_TRANSACTIONS until the commit's markers are written,
		// which takes about a millisecond on a healthy cluster; about one
		// transaction in seven meets it at 1,000 transactions/s. Retry
		// within a fraction of a millisecond, not sarama's 20-100 ms (a
		// 2 ms first retry was most of the exactly-once p99), and keep
		// retrying every millisecond through a stall of the coordinator.
		sc.Producer.Transaction.Retry.Max = eosTxnRetries
		sc.Producer.Transaction.Retry.BackoffFunc = func(retries, _ int) time.Duration {
			return eosTxnBackoff(retries)
		}
		if c.FlushBytes == 0 && c.FlushFrequency == 0 {
			// A short linger lets a transaction's events and its
			// position record, handed over microseconds apart, go out in
			// one produce request after one AddPartitionsToTxn: sent as
			// they come, the first event goes alone and the position
			// after it, two more round trips before the commit.
			sc.Producer.Flush.Frequency = eosLinger
		}
	}
	return sc, nil
}

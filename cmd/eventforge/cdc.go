package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/eventforge/eventforge/cdc"
	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/ops"
	"github.com/eventforge/eventforge/internal/shared/privileges"
)

func newCDCCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cdc",
		Short: "Relay outbox events from PostgreSQL to Kafka",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCDCRunCmd())
	return cmd
}

// relayFlags are the flags `cdc run` and `outbox republish` share.
type relayFlags struct {
	pg              pgFlags
	kafka           kafkaFlags
	topicPrefix     string
	partitions      int32
	replication     int16
	minInsync       int
	createTopics    bool
	compression     string
	maxMessageBytes int
	allowedTopics   []string
	mapping         mappingFlags
	schema          writerFlags
}

func (f *relayFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.pg.register(cmd)
	f.kafka.register(cmd)
	fs.StringVar(&f.topicPrefix, "topic-prefix", "", "prefix of every topic name (topic = prefix + aggregate_type, or the --outbox-column-topic value; preset debezium: outbox.event.)")
	fs.Int32Var(&f.partitions, "topic-partitions", cdc.DefaultTopicPartitions, "partitions of topics the relay creates")
	fs.Int16Var(&f.replication, "topic-replication-factor", cdc.DefaultTopicReplicationFactor, "replication factor of topics the relay creates; -1: the broker's default.replication.factor (Kafka 2.4 or later)")
	fs.IntVar(&f.minInsync, "topic-min-insync-replicas", 0, "min.insync.replicas of topics the relay creates; 0: the broker's default (set 2 on a cluster of 3 or more brokers)")
	fs.BoolVar(&f.createTopics, "create-topics", true, "create missing topics; when false events to a missing topic go to outbox_rejected")
	fs.StringVar(&f.compression, "compression", cdc.DefaultCompression, "record batch compression: none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&f.maxMessageBytes, "max-message-bytes", cdc.DefaultMaxMessageBytes, "largest record produced; larger events go to outbox_rejected")
	fs.StringSliceVar(&f.allowedTopics, "allowed-topics", nil, "the only topics events may go to, comma-separated full names (prefix included) or patterns with * and ?, e.g. 'shop.orders,shop.payments.*'; events for others go to outbox_rejected (default: all)")
	f.mapping.register(cmd, true)
	f.schema.register(cmd)
}

func (f *relayFlags) config(cmd *cobra.Command) (cdc.Config, error) {
	if err := f.pg.validate(); err != nil {
		return cdc.Config{}, err
	}
	m, prefix, err := f.mapping.mapping(cmd)
	if err != nil {
		return cdc.Config{}, err
	}
	cfg := cdc.DefaultConfig()
	cfg.PGURL = f.pg.url
	kc, err := f.kafka.config("eventforge-cdc")
	if err != nil {
		return cdc.Config{}, err
	}
	cfg.Kafka = kc
	cfg.TopicPrefix = f.topicPrefix
	if prefix != nil {
		cfg.TopicPrefix = *prefix
	}
	cfg.Mapping, cfg.OutboxTable = m, m.Table
	cfg.TopicPartitions = f.partitions
	cfg.TopicReplicationFactor = f.replication
	cfg.TopicMinInsyncReplicas = f.minInsync
	cfg.CreateTopics = f.createTopics
	cfg.Compression = f.compression
	cfg.MaxMessageBytes = f.maxMessageBytes
	cfg.AllowedTopics = f.allowedTopics
	return cfg, nil
}

func newCDCRunCmd() *cobra.Command {
	var (
		rf                relayFlags
		rc                replicationCheckFlags
		lf                logFlags
		slot, publication string
		maxEvents         int
		maxBytes          int64
		heartbeat         time.Duration
		statusInterval    time.Duration
		receiveTimeout    time.Duration
		shutdownTimeout   time.Duration
		metricsAddr       string
		pprofOn           bool
		backfill          backfillFlags
		eos               eosFlags
		slotFailover      string
		standbyURL        string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Stream committed outbox rows from the replication slot to Kafka (at-least-once)",
		Long: `Stream committed outbox rows from a logical replication slot (pgoutput) to Kafka with an
idempotent producer. The slot is confirmed only up to the end of the last transaction whose every
event the broker acknowledged, so a crash resends but never loses events. A second instance on the
same slot waits as a standby and takes over when the first one stops.

--exactly-once produces inside Kafka transactions instead and commits the relay's position in the
same transaction (to --position-topic): after a crash nothing already committed is sent again, so a
consumer reading with isolation.level=read_committed sees every event once.

The slot is created on the first run (or after eventforge slot drop) with an exported snapshot.
--backfill-since TIME (or --backfill-all) then publishes the outbox rows that snapshot sees, created
at or after TIME, waits for the broker to acknowledge them, and only then streams from the slot: every
row goes out once, and each key's older rows before its newer ones. This is also the recovery after a
lost slot: eventforge slot drop --slot NAME --yes, then cdc run --backfill-since TIME with TIME before
the old slot's last confirmation. Both flags are ignored when the slot exists.
TIME is RFC 3339 (2025-01-02T15:04:05Z), "2006-01-02 15:04:05" (UTC) or a date.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			relayGC(os.Getenv("GOGC"))
			cfg, err := rf.config(cmd)
			if err != nil {
				return err
			}
			replication, err := rc.check()
			if err != nil {
				return err
			}
			cfg.Slot, cfg.Publication = slot, publication
			cfg.MaxInFlightEvents, cfg.MaxInFlightBytes = maxEvents, maxBytes
			cfg.HeartbeatInterval, cfg.StatusInterval, cfg.ShutdownTimeout = heartbeat, statusInterval, shutdownTimeout
			cfg.ReceiveTimeout = receiveTimeout
			cfg.SlotFailover, cfg.StandbyURL = slotFailover, standbyURL
			eos.apply(&cfg)
			if err := backfill.apply(&cfg); err != nil {
				return err
			}
			if heartbeat == 0 {
				cfg.HeartbeatInterval = -1 // 0 disables
			}
			stopTracing, err := startTracing(cmd.Context(), "eventforge-relay", log)
			if err != nil {
				return err
			}
			defer stopTracing()
			reg := ops.NewRegistry()
			if err := rf.schema.apply(cmd.Context(), &cfg, reg); err != nil {
				return err
			}
			ready := &ops.Readiness{}
			relay, err := cdc.New(cfg, log, reg, ready)
			if err != nil {
				return asFlags(err, relayFlagNames())
			}
			needs := privileges.Relay(cfg.HeartbeatInterval > 0)
			needs.Replication = replication
			guard, err := needs.Verify(cmd.Context(), cfg.PGURL, log)
			if err != nil {
				return err
			}
			g, ctx := errgroup.WithContext(cmd.Context())
			srvCtx, stopServer := context.WithCancel(ctx)
			g.Go(func() error {
				defer stopServer()
				return relay.Run(ctx)
			})
			g.Go(func() error {
				if err := ops.Serve(srvCtx, metricsAddr, ops.Handler(reg, ready, pprofOption(pprofOn)...), log); err != nil {
					return fmt.Errorf("serve metrics on %s: %w", metricsAddr, err)
				}
				return nil
			})
			return kafka.Explain(guard.Explain(g.Wait()))
		},
	}
	rf.register(cmd)
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&slot, "slot", cdc.DefaultSlot, "logical replication slot (created when missing)")
	fs.StringVar(&publication, "publication", cdc.DefaultPublication, "publication of the outbox table (created by eventforge migrate)")
	fs.StringVar(&slotFailover, "slot-failover", cdc.SlotFailoverAuto, "make the slot a PostgreSQL 17 failover slot, synchronised to standbys so the relay resumes on a promoted one: auto (on PostgreSQL 17 and later), on (stop on an older server) or off; an existing slot is converted before streaming")
	fs.StringVar(&standbyURL, "standby-url", "", "a standby of the server (PostgreSQL URL): the failover check, at start and every minute, also asks whether it holds a synced copy of the slot")
	fs.IntVar(&maxEvents, "max-in-flight-events", cdc.DefaultMaxInFlightEvents, "events produced but not yet acknowledged before the relay stops reading")
	fs.Int64Var(&maxBytes, "max-in-flight-bytes", cdc.DefaultMaxInFlightBytes, "bytes of events produced but not yet acknowledged before the relay stops reading")
	fs.DurationVar(&heartbeat, "heartbeat-interval", cdc.DefaultHeartbeatInterval, "interval of heartbeat messages that keep the slot moving while the outbox is quiet; 0 disables")
	fs.DurationVar(&statusInterval, "status-interval", 0, "longest time between status updates to the server; 0 means min(10s, wal_sender_timeout/2)")
	fs.DurationVar(&receiveTimeout, "receive-timeout", 0, "silence (no data, no keepalive) on the replication connection after which it is presumed dead and the relay reconnects; 0 means max(3 x heartbeat, 3 x status interval, wal_sender_timeout) + 5s")
	fs.DurationVar(&shutdownTimeout, "shutdown-timeout", cdc.DefaultShutdownTimeout, "how long a shutdown waits for in-flight events to be acknowledged")
	fs.StringVar(&metricsAddr, "metrics-addr", cdc.DefaultMetricsAddr, "address serving /healthz, /readyz and /metrics, e.g. 127.0.0.1:9464 (empty: none)")
	fs.BoolVar(&pprofOn, "pprof", false, pprofUsage)
	backfill.register(cmd)
	eos.register(fs)
	rc.register(fs)
	annotateEnv(cmd)
	return cmd
}

// backfillFlags choose what a run that creates the slot publishes from the
// slot's snapshot before streaming.
type backfillFlags struct {
	since string
	all   bool
}

func (b *backfillFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&b.since, "backfill-since", "", "when this run creates the slot: first publish the outbox rows created at or after TIME that the slot's snapshot sees, then stream (recovery after slot drop); ignored when the slot exists")
	fs.BoolVar(&b.all, "backfill-all", false, "when this run creates the slot: first publish every outbox row the slot's snapshot sees, then stream; ignored when the slot exists")
}

func (b *backfillFlags) apply(cfg *cdc.Config) error {
	if b.since != "" && b.all {
		return errors.New("--backfill-since and --backfill-all exclude each other")
	}
	cfg.BackfillAll = b.all
	if b.since == "" {
		return nil
	}
	t, err := parseTime("--backfill-since", b.since)
	if err != nil {
		return err
	}
	cfg.BackfillSince = t
	return nil
}

// relayGCPercent is the relay's garbage collector target unless GOGC is
// set. Its heap is mostly records in flight, short-lived and bounded by
// --max-in-flight-*; collecting at three quarters of the live heap instead
// of all of it keeps the peak RSS of a 1,000,000-row transaction at 81-86 MB
// instead of 89-101 MB for a few percent more CPU. A GC percentage costs in
// proportion to the heap; a memory limit (GOMEMLIMIT) would collect
// nonstop once records in flight outgrew it (docs/relay.md).
const relayGCPercent = 75

// relayGC sets relayGCPercent when gogc (the GOGC variable) is empty: an
// operator's GOGC wins.
func relayGC(gogc string) {
	if gogc == "" {
		debug.SetGCPercent(relayGCPercent)
	}
}

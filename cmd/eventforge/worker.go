package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/ops"
	"github.com/eventforge/eventforge/internal/shared/privileges"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/sqlhandler"
)

func newWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Apply events from Kafka to PostgreSQL exactly once in effect (inbox pattern)",
	}
	cmd.AddCommand(newWorkerRunCmd())
	return cmd
}

// workerRunFlags are the flags of worker run.
type workerRunFlags struct {
	pg          pgFlags
	log         logFlags
	kafka       kafkaFlags
	metricsAddr string
	pprof       bool
	handlers    string
	registry    registryFlags
	cfg         worker.Config
}

func newWorkerRunCmd() *cobra.Command {
	var f workerRunFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Consume topics as a member of a consumer group and apply each event in one transaction with its inbox row",
		Long: `Consume topics as a member of a consumer group. Each event is applied in one PostgreSQL transaction
together with its processed_events (consumer, event_id) row; the offset is committed only after that commit,
so a crash redelivers and the inbox drops what was already applied.

Failures are retried in place (the partition waits, so per-key order holds), up to --max-attempts attempts
and --max-retry-time, then dead-lettered to <topic>.dlq, unless the events behind the failing one fail the
same way (--outage-events in a row): then the partition waits. After a failed apply the worker probes the
database (--probe-timeout): a database that is unreachable, read-only or refuses the inbox insert, and missing
tables, columns, functions or types, are waited for without spending attempts, never dead-lettered; so is a
handler that returns worker.DependencyUnavailable. Malformed records are dead-lettered at once. A copy of a
dead-lettered event is a duplicate; dlq replay applies it once.

At start-up the worker waits for PostgreSQL (with backoff), and exits with one line when waiting cannot
help: a refused role or password, an unknown database, a database without processed_events.

Without --handlers every event is only recorded in the inbox (counted as skipped).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWorker(cmd.Context(), cmd, &f) },
	}
	fs := cmd.Flags()
	f.pg.register(cmd)
	f.log.register(fs)
	f.kafka.register(cmd)
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "address serving /healthz, /readyz and /metrics, e.g. :9102 (empty: none)")
	fs.BoolVar(&f.pprof, "pprof", false, pprofUsage)
	fs.StringVar(&f.handlers, "handlers", "", "YAML file mapping event types to SQL statements (see deploy/handlers/orders.yaml)")
	fs.StringVar(&f.cfg.Group, "group", "", "Kafka consumer group (required)")
	fs.StringVar(&f.cfg.Consumer, "consumer", "", "consumer name in processed_events (default: the group)")
	fs.StringSliceVar(&f.cfg.Topics, "topics", nil, "topics to consume, comma-separated (required)")
	fs.IntVar(&f.cfg.MaxAttempts, "max-attempts", worker.DefaultMaxAttempts, "attempts in all before a failing event is dead-lettered")
	fs.DurationVar(&f.cfg.RetryBackoff, "retry-backoff", worker.DefaultRetryBackoff, "first wait between attempts; doubles each time, with jitter")
	fs.DurationVar(&f.cfg.MaxBackoff, "max-backoff", worker.DefaultMaxBackoff, "longest wait between attempts")
	fs.DurationVar(&f.cfg.MaxRetryTime, "max-retry-time", worker.DefaultMaxRetryTime, "longest time spent retrying one event before dead-lettering it")
	fs.IntVar(&f.cfg.BatchSize, "batch-size", worker.DefaultBatchSize, "most messages of one partition applied in one transaction (1: one by one); a failing batch is redone one by one")
	fs.IntVar(&f.cfg.BatchBytes, "batch-bytes", worker.DefaultBatchBytes, "most bytes of record keys and values in one batch (a batch holds at least one record)")
	fs.DurationVar(&f.cfg.ApplyTimeout, "apply-timeout", worker.DefaultApplyTimeout, "longest time one transaction may take")
	fs.DurationVar(&f.cfg.SessionTimeout, "session-timeout", worker.DefaultSessionTimeout, "how long the group waits for a silent member before moving its partitions")
	fs.DurationVar(&f.cfg.CommitInterval, "commit-interval", worker.DefaultCommitInterval, "how often applied offsets are committed to Kafka")
	fs.IntVar(&f.cfg.OutageEvents, "outage-events", worker.DefaultOutageEvents, "consecutive distinct events of a partition failing with the same cause, while the database works, that make an outage: the partition waits instead of dead-lettering them")
	fs.DurationVar(&f.cfg.ProbeTimeout, "probe-timeout", worker.DefaultProbeTimeout, "longest time the database probe after a failed apply may take before the database counts as unavailable")
	f.registry.register(cmd)
	annotateEnv(cmd)
	return cmd
}

func runWorker(ctx context.Context, cmd *cobra.Command, f *workerRunFlags) error {
	log, err := f.log.logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if err := f.pg.validate(); err != nil {
		return err
	}
	if err := f.positive(); err != nil {
		return err
	}
	cfg := f.cfg
	if cfg.Kafka, err = f.kafka.config("eventforge-worker"); err != nil {
		return err
	}
	stopTracing, err := startTracing(cmd.Context(), "eventforge-worker", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.Logger = log
	reg := ops.NewRegistry()
	cfg.Registerer = reg
	if cfg.ValueDecoder, err = f.registry.decoder(reg); err != nil {
		return err
	}
	if err := cfg.Check(); err != nil {
		return asFlags(err, workerFlagNames())
	}
	if span := cfg.ShortestRetrySpan(); span < worker.LateRowWindow {
		log.Warn("--max-attempts, --retry-backoff and --max-retry-time may dead-letter an event whose business row becomes visible late (docs/guarantees.md)",
			"shortest_retry_span", span, "late_row_window", worker.LateRowWindow)
	}

	var spec *sqlhandler.Spec
	if f.handlers != "" {
		if spec, err = sqlhandler.Load(f.handlers); err != nil {
			return err
		}
	}
	return serveWorker(ctx, f, cfg, spec, reg)
}

// serveWorker opens the pool, serves /healthz, /readyz and /metrics from the
// start, and runs the worker until ctx ends or it fails; the error is
// explained in terms of the privileges and the broker where it can be.
func serveWorker(ctx context.Context, f *workerRunFlags, cfg worker.Config, spec *sqlhandler.Spec, reg *prometheus.Registry) error {
	log := cfg.Logger
	poolCfg, err := pgxpool.ParseConfig(f.pg.url)
	if err != nil {
		return fmt.Errorf("invalid PostgreSQL URL %s", f.pg.redacted())
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg) // connects lazily
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL %s: %w", f.pg.redacted(), err)
	}
	defer pool.Close()

	// /healthz and /readyz answer while the worker waits for PostgreSQL.
	ready := &ops.Readiness{}
	ready.Add("consumer-group", func(context.Context) error { return errors.New("starting: waiting for PostgreSQL") })
	ready.Add("database", func(ctx context.Context) error { return pool.Ping(ctx) })
	g, gctx := errgroup.WithContext(ctx)
	srvCtx, stopServer := context.WithCancel(gctx)
	g.Go(func() error {
		return ops.Serve(srvCtx, f.metricsAddr, ops.Handler(reg, ready, pprofOption(f.pprof)...), log)
	})
	var guard *privileges.Guard
	g.Go(func() error {
		defer stopServer()
		runner, gd, err := startWorker(gctx, f, cfg, pool, spec)
		guard = gd
		if err != nil || runner == nil {
			return err
		}
		ready.Add("consumer-group", runner.Ready)
		log.Info("worker starting", "group", cfg.Group, "topics", cfg.Topics, "pg", f.pg.redacted(), "handlers", f.handlers)
		return runner.Run(gctx)
	})
	err = g.Wait()
	if guard != nil {
		err = guard.Explain(err)
	}
	return kafka.Explain(err)
}

// startWorker waits for PostgreSQL, as the relay does, then compiles the
// handlers, checks the privileges and returns the Runner; a nil Runner and
// error when ctx ended first. What waiting cannot mend (a refused password,
// an unknown database, a missing table) fails at once.
func startWorker(ctx context.Context, f *workerRunFlags, cfg worker.Config, pool *pgxpool.Pool, spec *sqlhandler.Spec) (*worker.Runner, *privileges.Guard, error) {
	if err := worker.WaitForDatabase(ctx, pool, cfg.Logger); err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("connect to PostgreSQL %s: %w", f.pg.redacted(), err)
	}
	if err := worker.CheckSchema(ctx, pool); err != nil {
		return nil, nil, err
	}
	handler, err := workerHandler(ctx, pool, spec, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	guard, err := privileges.Worker(handlerStatements(spec)).Verify(ctx, f.pg.url, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	runner, err := worker.New(cfg, pool, handler)
	if err != nil {
		return nil, guard, asFlags(err, workerFlagNames())
	}
	return runner, guard, nil
}

// positive rejects zero and negative numbers given to flags, which the
// library would otherwise read as "use the default".
func (f *workerRunFlags) positive() error {
	for name, v := range map[string]int64{
		"--max-attempts": int64(f.cfg.MaxAttempts), "--batch-size": int64(f.cfg.BatchSize),
		"--batch-bytes": int64(f.cfg.BatchBytes), "--retry-backoff": int64(f.cfg.RetryBackoff),
		"--max-backoff": int64(f.cfg.MaxBackoff), "--max-retry-time": int64(f.cfg.MaxRetryTime),
		"--apply-timeout": int64(f.cfg.ApplyTimeout), "--commit-interval": int64(f.cfg.CommitInterval),
		"--session-timeout": int64(f.cfg.SessionTimeout),
		"--outage-events":   int64(f.cfg.OutageEvents), "--probe-timeout": int64(f.cfg.ProbeTimeout),
	} {
		if v <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	return nil
}

// workerHandler compiles the handlers file against the database, or records
// events in the inbox only when there is none.
func workerHandler(ctx context.Context, pool *pgxpool.Pool, spec *sqlhandler.Spec, log *slog.Logger) (worker.Handler, error) {
	if spec == nil {
		log.Warn("no --handlers file: events are recorded in the inbox without effect")
		return worker.HandlerFunc(func(context.Context, pgx.Tx, worker.Event) error { return worker.ErrSkip }), nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Release()
	return sqlhandler.New(ctx, conn.Conn().PgConn(), spec)
}

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/pgconn"
	"github.com/eventforge/eventforge/internal/tools/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		pg                     pgFlags
		lf                     logFlags
		brokers, stages, rates string
		modes, shapes          string
		cfg                    bench.Config
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the relay and the worker on real services and compare with pg_recvlogical (docs/bench.md)",
		Long: `Measure EventForge on the PostgreSQL cluster and Kafka broker given (make bench uses the local ones).
Each measurement gets a fresh database (and drops it, with its slots, at the end) and fresh topics.

  drain   write --events outbox events with no reader (--shapes: 1,000-row transactions, then single-row
          transactions with an orders row), drain the same WAL with pg_recvlogical and with the relay
          (cdc run subprocess), each from its own slot; report both rates, their ratio, both CPU
          costs and the relay's records per produce request; --repeat runs each shape several times
  steady  an open-loop writer at each of --rates while the relay runs; commit-to-ack p50/p99/p99.9
          from the relay's eventforge_cdc_commit_to_ack_seconds, maximum slot lag; --repeat runs the
          stage in rounds, each mode in turn, and pools each rate's latency samples
  worker  pre-fill a topic, then time worker run (subprocess) in batch mode and one by one
  kafka   (not by default) the relay's producer alone at each of --rates, in each mode: hand-over
          to ack, or to the Kafka transaction's commit; the floor under the steady latencies

CPU seconds per million events and peak RSS are the relay's or worker's. Prints a table with the
performance targets (PASS/MISS) and writes JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := pg.validate(); err != nil {
				return err
			}
			if cfg.Stages, err = bench.ParseStages(stages); err != nil {
				return err
			}
			if cfg.Modes, err = bench.ParseModes(modes); err != nil {
				return err
			}
			if cfg.Shapes, err = bench.ParseShapes(shapes); err != nil {
				return err
			}
			if cfg.Rates, err = bench.ParseRates(rates); err != nil {
				return err
			}
			if cfg.Binary, err = os.Executable(); err != nil {
				return fmt.Errorf("find own binary: %w", err)
			}
			cfg.PGURL, cfg.Brokers = pg.url, kafka.ParseBrokers(brokers)
			cfg.Command, cfg.Version = commandLine(), version
			cfg.Out, cfg.Log = cmd.OutOrStdout(), log
			_, err = bench.Run(cmd.Context(), cfg)
			return err
		},
	}
	pg.register(cmd)
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&brokers, "kafka-brokers", "", "Kafka bootstrap brokers, comma-separated host:port")
	fs.StringVar(&stages, "stages", bench.DefaultStages, "stages to run, comma-separated: drain, steady, worker, kafka")
	fs.StringVar(&modes, "modes", bench.DefaultModes, "delivery modes of the drain, steady and kafka stages, comma-separated: at-least-once, exactly-once (cdc run --exactly-once)")
	fs.StringVar(&shapes, "shapes", bench.DefaultShapes, "transaction shapes of the drain stage, comma-separated: bulk (1,000-row transactions, a key per row), bulk:K (1,000-row transactions cycling over K keys: bulk:1 one hot key, bulk:1000 every transaction touching the same 1,000 keys), single (single-row transactions)")
	fs.IntVar(&cfg.Repeat, "repeat", bench.DefaultRepeat, "runs of each drain shape and mode, each on a fresh database, and rounds of the steady stage, each running every mode in turn; above 1, a summary row per drain shape gives the median, min and max and flags runs below half the median events/s, and one per steady rate pools the runs' latency samples")
	fs.IntVar(&cfg.Events, "events", bench.DefaultEvents, "backlog of the drain stage, per transaction shape")
	fs.StringVar(&cfg.ValueSchema, "value-schema", "", "avro: run the drain stage again with the relay writing Avro values (cdc run --value-schema avro) against a schema registry the bench serves on loopback, and compare the two drains")
	fs.DurationVar(&cfg.SteadyDuration, "steady-duration", bench.DefaultSteadyDuration, "how long each steady-state rate runs")
	fs.StringVar(&rates, "rates", bench.DefaultRates, "steady-state rates, comma-separated EVENTS_PER_SEC[/ROWS_PER_TXN]; single-row transactions also insert an order")
	fs.IntVar(&cfg.WorkerEvents, "worker-events", bench.DefaultWorkerEvents, "events applied by the worker in batch mode")
	fs.IntVar(&cfg.WorkerSingleEvents, "worker-single-events", bench.DefaultWorkerSingleEvents, "events applied by the worker one by one (--batch-size 1)")
	fs.IntVar(&cfg.Writers, "writers", bench.DefaultWriters, "connections of the steady-state writer")
	fs.DurationVar(&cfg.StatusInterval, "relay-status-interval", bench.DefaultStatusInterval, "--status-interval of the relay: how often it confirms, so how exactly drain ends and slot lag are seen")
	fs.StringVar(&cfg.RecvLogical, "pg-recvlogical", "", "pg_recvlogical binary (default: from pg_config --bindir, PATH or /usr/lib/postgresql/*/bin)")
	fs.StringVar(&cfg.JSONOut, "json-out", bench.DefaultJSONOut, "where the JSON results go (subprocess logs go to logs/ next to it)")
	fs.StringVar(&cfg.PprofDir, "pprof-dir", "", "write 20 s CPU profiles of the relay and worker here, when they serve /debug/pprof (empty: none)")
	annotateEnv(cmd)
	return cmd
}

// commandLine is how the bench was started, for the report; the PostgreSQL
// URL's password never appears in it.
func commandLine() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = a
		if strings.Contains(a, "://") {
			args[i] = pgconn.Redact(a)
		}
	}
	return strings.Join(args, " ")
}

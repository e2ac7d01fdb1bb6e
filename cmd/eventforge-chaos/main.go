// Command eventforge-chaos runs EventForge's chaos test (make chaos): private
// PostgreSQL (a primary and a synchronous standby) and a 3-node Kafka
// cluster, labelled load, two relays, three workers and random SIGKILLs,
// restarts, broker freezes and promotions, then checks the guarantees and
// prints one line.
// Exit status 1 when a guarantee broke or the run failed.
//
// Imports (floor: program): internal/tools/chaos.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/eventforge/eventforge/internal/tools/chaos"
)

func main() {
	cfg := chaos.DefaultConfig()
	root, _ := os.Getwd()
	flag.StringVar(&cfg.Bin, "bin", "bin/eventforge", "the eventforge binary")
	flag.StringVar(&root, "root", root, "repository root (deploy/local scripts)")
	flag.StringVar(&cfg.StateDir, "state-dir", "", "private services, logs and report (default ROOT/.eventforge/chaos)")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the fault phase")
	flag.DurationVar(&cfg.Quiesce, "quiesce", cfg.Quiesce, "longest wait for every committed event to take effect afterwards")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the load and the fault schedule (0: random, printed)")
	flag.StringVar(&cfg.Report, "report", "", "JSON report path (default STATE_DIR/report.json)")
	flag.IntVar(&cfg.Writers, "writers", cfg.Writers, "concurrent SQL writers")
	flag.BoolVar(&cfg.ExactlyOnce, "exactly-once", false, "run the relays with --exactly-once, read the topic with read_committed and require duplicates=0")
	flag.IntVar(&cfg.KafkaNodes, "kafka-nodes", cfg.KafkaNodes, "brokers: 3 (a KRaft cluster, topics replicated 3 times) or 1")
	flag.BoolVar(&cfg.Promotions, "promotions", cfg.Promotions, "run PostgreSQL as a primary and a synchronous standby with slot synchronisation and promote the standby among the faults (PostgreSQL 17 or later)")
	flag.StringVar(&cfg.PGVersion, "pg-version", os.Getenv("EVENTFORGE_PG_VERSION"), "PostgreSQL major version (16, 17, 18 from Maven Central; empty: the machine's, or 17 with --promotions)")
	flag.BoolVar(&cfg.NoBrokerRestarts, "no-broker-faults", false, "leave the brokers out of the fault schedule (restarts and freezes)")
	flag.Parse()
	cfg.Root = root
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(root, ".eventforge", "chaos")
	}
	if abs, err := filepath.Abs(cfg.Bin); err == nil {
		cfg.Bin = abs
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	rep, err := chaos.Run(ctx, cfg)
	stop()
	if rep != nil {
		fmt.Println(rep.Line())
		for _, e := range rep.Result.Examples {
			fmt.Println("  " + e)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventforge-chaos:", err)
		os.Exit(1)
	}
}

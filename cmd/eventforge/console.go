package main

import (
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/tools/console"
)

func newConsoleCmd() *cobra.Command {
	var (
		pg        pgFlags
		kf        kafkaFlags
		lf        logFlags
		cfg       = console.DefaultConfig()
		workers   []string
		token     string
		tokenFile string
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve a web page that explains one order's journey and shows the pipeline's real state",
		Long: `Serve the EventForge console: a web page that follows one order through the API, the outbox, the relay,
Kafka and a worker, with four state cards (order, outbox, business effect, Kafka offset) read from the
system, and the live signals (slot lag, publish errors, consumer lag, duplicates dropped, retries, oldest
dead letter).

Read-only (default) it looks at a running pipeline: --pg-url, --kafka-brokers, --slot, --topic, --group
and the metrics addresses. With --demo it creates a fresh database, slot, topic prefix and consumer group
on those services, starts its own API, relay and two workers (this binary), offers the journey and the
failure scenarios (run for real, with failpoints), and removes everything when it stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := pg.validate(); err != nil {
				return err
			}
			if cfg.Kafka, err = kf.config("eventforge-console"); err != nil {
				return err
			}
			cfg.PGURL, cfg.WorkerMetrics, cfg.Logger = pg.url, workers, log
			if err := kf.files.check(log, map[string]string{"console-token-file": tokenFile}); err != nil {
				return err
			}
			if cfg.Token, err = resolveToken(token, tokenFile, "console token", "--console-token"); err != nil {
				return err
			}
			if cfg.Demo && cfg.Bin == "" {
				if cfg.Bin, err = os.Executable(); err != nil {
					return fmt.Errorf("find the eventforge binary: %w", err)
				}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			ln, err := net.Listen("tcp", cfg.HTTPAddr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
			}
			c, err := console.New(cmd.Context(), cfg)
			if err != nil {
				ln.Close()
				return err
			}
			defer c.Close()
			if cfg.Token == "" && cfg.InsecureNoAuth {
				warnExposed(log, "console", ln.Addr().String(), "--console-token-file")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "eventforge console: http://%s/\n", ln.Addr())
			return c.Serve(cmd.Context(), ln)
		},
	}
	fs := cmd.Flags()
	pg.register(cmd)
	kf.register(cmd)
	lf.register(fs)
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "host:port to serve the console on")
	fs.BoolVar(&cfg.Demo, "demo", false, "start a demo pipeline of its own (fresh database, slot, topics, group; API, relay and two workers) and offer the scenarios")
	fs.StringVar(&cfg.Bin, "bin", "", "eventforge binary the demo starts (default: this one)")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "directory of the demo's logs")
	fs.StringVar(&cfg.Slot, "slot", cfg.Slot, "read-only: the relay's replication slot")
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "read-only: the orders topic (prefix included)")
	fs.StringVar(&cfg.Group, "group", cfg.Group, "read-only: the workers' consumer group")
	fs.StringVar(&cfg.Consumer, "consumer", "", "read-only: the workers' processed_events consumer name (default: the group)")
	fs.StringVar(&cfg.RelayMetrics, "relay-metrics-addr", "", "read-only: host:port of the relay's /metrics (several, comma-separated: the active relay and its standbys)")
	fs.StringSliceVar(&workers, "worker-metrics-addrs", nil, "read-only: host:port of each worker's /metrics, comma-separated")
	fs.StringVar(&cfg.APIURL, "api-url", "", "read-only: the orders API's base URL, shown on the page")
	fs.StringSliceVar(&cfg.AllowedHosts, "allowed-hosts", nil, "host names the console answers to besides the bind address, localhost and loopback addresses (others get 421), comma-separated")
	// The token's default is empty on purpose: --help must never show one.
	fs.StringVar(&token, "console-token", "", "bearer token every request must carry (a browser: open /?token=… once); needed beyond loopback; prefer --console-token-file")
	fs.StringVar(&tokenFile, "console-token-file", "", "file holding the console's bearer token")
	fs.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", false, "serve beyond loopback without a token (anyone who reaches --http-addr reads the pipeline, and with --demo drives it)")
	annotateEnv(cmd)
	return cmd
}

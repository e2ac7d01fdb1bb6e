package main

import (
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/api"
)

func newAPICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "The orders HTTP API",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newAPIRunCmd())
	return cmd
}

func newAPIRunCmd() *cobra.Command {
	var (
		pg  pgFlags
		lf  logFlags
		cfg = api.DefaultConfig()
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Serve POST /orders and GET /orders/{id}, with /healthz, /readyz and /metrics",
		Long: `Serve the orders API until SIGTERM or SIGINT, then let in-flight requests finish.

POST /orders takes {"id"?: string, "customer": string, "amount": integer > 0, "currency": ISO 4217 code}
and writes the orders row and its order.created outbox event in one transaction (201 {"id","status","event_id"}).
An Idempotency-Key header makes a retry return the first answer. GET /orders/{id} reads an order back.
/healthz, /readyz (database reachable and migrated) and /metrics are served on --http-addr, and on
--metrics-addr too when it is set.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pg.validate(); err != nil {
				return err
			}
			log, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.PGURL = pg.url
			return api.Run(cmd.Context(), cfg, log)
		},
	}
	pg.register(cmd)
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "host:port to serve the API, /healthz, /readyz and /metrics on")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "host:port to serve /healthz, /readyz and /metrics on as well (empty: not)")
	fs.Int32Var(&cfg.MaxConns, "pg-max-conns", cfg.MaxConns, "largest number of PostgreSQL connections")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "deadline of each request's work")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "HTTP server write timeout; must exceed --request-timeout")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "time in-flight requests get to finish after SIGTERM")
	annotateEnv(cmd)
	return cmd
}

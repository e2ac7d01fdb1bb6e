package main

import (
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/api"
	"github.com/eventforge/eventforge/internal/shared/privileges"
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
		pg        pgFlags
		lf        logFlags
		cfg       = api.DefaultConfig()
		token     string
		tokenFile string
		files     secretFileFlags
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Serve POST /orders and GET /orders/{id}, with /healthz, /readyz and /metrics",
		Long: `Serve the orders API until SIGTERM or SIGINT, then let in-flight requests finish.

POST /orders takes {"id"?: string, "customer": string, "amount": integer > 0, "currency": ISO 4217 code}
and writes the orders row and its order.created outbox event in one transaction (201 {"id","status","event_id"}).
An Idempotency-Key header makes a retry within --idempotency-ttl return the first answer. GET /orders/{id} reads an order back.
/healthz, /readyz (database reachable and migrated) and /metrics are served on --http-addr, and on
--metrics-addr too when it is set, with GET /openapi.json (the OpenAPI 3.0 document).
With --api-token or --api-token-file the /orders routes need "Authorization: Bearer <token>".`,
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
			if err := files.check(log, map[string]string{"api-token-file": tokenFile}); err != nil {
				return err
			}
			if cfg.Token, err = api.ResolveToken(token, tokenFile); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil { // before connecting anywhere
				return asFlags(err, apiFlagNames())
			}
			if cfg.Token == "" {
				warnExposed(log, "api run", cfg.HTTPAddr, "--api-token-file")
			}
			stopTracing, err := startTracing(cmd.Context(), "eventforge-api", log)
			if err != nil {
				return err
			}
			defer stopTracing()
			guard, err := privileges.API().Verify(cmd.Context(), pg.url, log)
			if err != nil {
				return err
			}
			return guard.Explain(api.Run(cmd.Context(), cfg, log))
		},
	}
	pg.register(cmd)
	lf.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "host:port to serve the API, /healthz, /readyz and /metrics on")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "host:port to serve /healthz, /readyz and /metrics on as well (empty: not)")
	fs.BoolVar(&cfg.CreateTables, "create-tables", cfg.CreateTables, "create the orders and api_idempotency tables when they are missing (needs CREATE on the schema; else run eventforge migrate --demo)")
	fs.Int32Var(&cfg.MaxConns, "pg-max-conns", cfg.MaxConns, "largest number of PostgreSQL connections")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "deadline of each request's work")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "HTTP server write timeout; must exceed --request-timeout")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "time in-flight requests get to finish after SIGTERM")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", cfg.ReadHeaderTimeout, "time a client gets to send the request line and headers")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", cfg.ReadTimeout, "time a client gets to send the whole request, body included")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "time an idle keep-alive connection stays open")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "largest request body accepted (413 above)")
	fs.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", cfg.MaxHeaderBytes, "largest request line and headers accepted (431 above)")
	fs.DurationVar(&cfg.IdempotencyTTL, "idempotency-ttl", cfg.IdempotencyTTL, "how long an Idempotency-Key's answer is kept and replayed; older keys count as new and are pruned in small batches")
	// The token's default is empty on purpose: --help must never show one.
	fs.StringVar(&token, "api-token", "", "bearer token the /orders routes require (empty: none); prefer --api-token-file")
	fs.StringVar(&tokenFile, "api-token-file", "", "file holding the bearer token the /orders routes require")
	files.register(fs)
	annotateEnv(cmd)
	return cmd
}

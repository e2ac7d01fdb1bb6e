package main

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/migrate"
)

func newMigrateCmd() *cobra.Command {
	var (
		pg   pgFlags
		opts migrate.Options
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update EventForge's tables and publication (idempotent, safe to run concurrently)",
		Long: `Create or update what the pipeline needs: the outbox, the workers' processed_events, the relay's
tables (relay_state, outbox_rejected) and the publication of the outbox. --demo adds the demo's
tables (orders, api_idempotency) that api run and deploy/handlers/orders.yaml use.

With --outbox-table naming a table of the application's own (anything but public.outbox), the
table must exist with the columns the relay reads; migrate then creates only the relay's tables
and the publication covering that table (docs/managed-postgres.md#your-own-outbox-table).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pg.validate(); err != nil {
				return err
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			conn, err := pgx.Connect(cmd.Context(), pg.url)
			if err != nil {
				return fmt.Errorf("connect to PostgreSQL %s: %w", pg.redacted(), err)
			}
			defer conn.Close(cmd.Context())
			applied, err := migrate.Run(cmd.Context(), conn, opts)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
			}
			for _, v := range applied {
				fmt.Fprintln(cmd.OutOrStdout(), "applied", v)
			}
			return nil
		},
	}
	pg.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&opts.Demo, "demo", false, "also create the demo's tables (orders, api_idempotency) used by api run and deploy/handlers/orders.yaml")
	fs.StringVar(&opts.OutboxTable, "outbox-table", migrate.DefaultOutboxTable, "schema.table of the outbox; any other table than the default must exist, and only the relay's tables and the publication are added")
	fs.StringVar(&opts.Publication, "publication", migrate.DefaultPublication, "publication of the outbox table (created when missing; an existing one must cover the outbox table)")
	annotateEnv(cmd)
	return cmd
}

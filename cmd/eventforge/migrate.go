package main

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/migrate"
)

func newMigrateCmd() *cobra.Command {
	var pg pgFlags
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update EventForge's tables and publication (idempotent, safe to run concurrently)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pg.validate(); err != nil {
				return err
			}
			ms, err := migrate.Embedded()
			if err != nil {
				return err
			}
			conn, err := pgx.Connect(cmd.Context(), pg.url)
			if err != nil {
				return fmt.Errorf("connect to PostgreSQL %s: %w", pg.redacted(), err)
			}
			defer conn.Close(cmd.Context())
			applied, err := migrate.Apply(cmd.Context(), conn, ms)
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
	annotateEnv(cmd)
	return cmd
}

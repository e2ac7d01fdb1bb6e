package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/pgconn"
)

// pgFlags is the PostgreSQL connection flag shared by every command.
type pgFlags struct{ url string }

func (p *pgFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.url, "pg-url", "", "PostgreSQL connection URL, e.g. postgres://user@host:5432/db?sslmode=disable")
}

func (p *pgFlags) validate() error {
	if p.url == "" {
		return errors.New("no PostgreSQL URL: set --pg-url or EVENTFORGE_PG_URL")
	}
	_, err := pgconn.ParseConfig(p.url)
	return err
}

// redacted is the URL without its password, for logs and errors.
func (p *pgFlags) redacted() string { return pgconn.Redact(p.url) }

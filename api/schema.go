package api

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/migrate"
)

// ensureDemoSchema creates the tables the API writes (orders and
// api_idempotency, the demo's tables) when they are missing, so `migrate`
// followed by `api run` works. `eventforge migrate` alone creates only what
// the pipeline needs. A role that may not create tables (the least-privilege
// API role) gets one warning line; /readyz then says what to run.
func ensureDemoSchema(ctx context.Context, url string, log *slog.Logger) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return // Run's pool reports an unreachable database
	}
	defer conn.Close(ctx)
	var present bool
	err = conn.QueryRow(ctx, `SELECT to_regclass('orders') IS NOT NULL AND to_regclass('api_idempotency') IS NOT NULL`).Scan(&present)
	if err != nil || present {
		return
	}
	applied, err := migrate.Run(ctx, conn, migrate.Options{Demo: true})
	if err != nil {
		log.Warn("could not create the API's tables; run eventforge migrate --demo", "err", err)
		return
	}
	log.Info("created the API's tables", "migrations", applied)
}

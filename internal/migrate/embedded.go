package migrate

import (
	"context"

	"github.com/jackc/pgx/v5"

	eventsql "github.com/eventforge/eventforge/sql"
)

// Embedded returns EventForge's own migrations (sql/migrations), in order.
func Embedded() ([]Migration, error) { return Load(eventsql.Migrations, "migrations") }

// URL connects to the database at url and applies the embedded migrations,
// returning the versions it applied. Errors carry no connection string.
func URL(ctx context.Context, url string) ([]string, error) {
	ms, err := Embedded()
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	return Apply(ctx, conn, ms)
}

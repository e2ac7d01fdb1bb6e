package migrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// outboxColumns are the columns the relay reads from every outbox row.
var outboxColumns = []string{"event_id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers"}

// checkOwnOutbox reports an application outbox that is missing or lacks a
// column the relay reads.
func checkOwnOutbox(ctx context.Context, conn *pgx.Conn, table string) error {
	var exists bool
	var missing []string
	err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		coalesce((SELECT array_agg(c ORDER BY o) FROM unnest($2::text[]) WITH ORDINALITY AS w(c, o)
			WHERE NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = to_regclass($1)
				AND a.attname = w.c AND a.attnum > 0 AND NOT a.attisdropped)), '{}')`,
		quoted(table), outboxColumns).Scan(&exists, &missing)
	if err != nil {
		return fmt.Errorf("check outbox table %s: %w", table, err)
	}
	if !exists {
		return fmt.Errorf("outbox table %s does not exist: create it first (docs/managed-postgres.md#your-own-outbox-table), or leave --outbox-table at %s for migrate to create it", table, DefaultOutboxTable)
	}
	if len(missing) > 0 {
		return fmt.Errorf("outbox table %s lacks column(s) %s that the relay reads", table, strings.Join(missing, ", "))
	}
	return nil
}

// ensurePublication creates publication name for INSERTs on table when it is
// missing, and refuses one that exists without covering table (the relay
// would stream nothing).
func ensurePublication(ctx context.Context, conn *pgx.Conn, name, table string) error {
	var exists, covers bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_publication WHERE pubname = $1),
		EXISTS (SELECT FROM pg_publication_tables WHERE pubname = $1 AND schemaname || '.' || tablename = $2)`,
		name, table).Scan(&exists, &covers)
	if err != nil {
		return fmt.Errorf("check publication %s: %w", name, err)
	}
	switch {
	case covers:
		return nil
	case exists:
		return fmt.Errorf("publication %s exists but does not cover %s: choose another --publication, or ALTER PUBLICATION %s ADD TABLE %s", name, table, name, quoted(table))
	}
	// INSERTs only: deleting published outbox rows never needs a replica
	// identity and never emits events.
	stmt := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')", pgx.Identifier{name}.Sanitize(), quoted(table))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("create publication %s: %w", name, err)
	}
	return nil
}

// quoted is schema.table quoted for SQL.
func quoted(table string) string {
	return pgx.Identifier(strings.SplitN(table, ".", 2)).Sanitize()
}

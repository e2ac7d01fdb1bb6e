package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	eventsql "github.com/eventforge/eventforge/sql"
)

// Embedded returns the embedded migrations o selects, in version order: the
// pipeline's and the relay's by default, only the relay's for an outbox of
// the application's own (o.OutboxTable), the demo's too with o.Demo.
func Embedded(o Options) ([]Migration, error) {
	dirs := []string{eventsql.PipelineDir, eventsql.RelayDir}
	if o.ownOutbox() {
		dirs = []string{eventsql.RelayDir}
	}
	if o.Demo {
		dirs = append(dirs, eventsql.DemoDir)
	}
	var all []Migration
	seen := map[string]string{}
	for _, d := range dirs {
		ms, err := Load(eventsql.Migrations, d)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if prev, dup := seen[m.Version]; dup {
				return nil, fmt.Errorf("migration %s is in both %s and %s", m.Version, prev, d)
			}
			seen[m.Version] = d
		}
		all = append(all, ms...)
	}
	slices.SortFunc(all, func(a, b Migration) int { return strings.Compare(a.Version, b.Version) })
	return all, nil
}

// Run applies the migrations o selects on conn, then makes sure o's
// publication covers o's outbox, all under the migration lock. It returns
// the versions it applied.
func Run(ctx context.Context, conn *pgx.Conn, o Options) ([]string, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ms, err := Embedded(o)
	if err != nil {
		return nil, err
	}
	var applied []string
	err = locked(ctx, conn, func() error {
		if o.ownOutbox() {
			if err := checkOwnOutbox(ctx, conn, o.outboxTable()); err != nil {
				return err
			}
		}
		var err error
		if applied, err = Apply(ctx, conn, ms); err != nil {
			return err
		}
		return ensurePublication(ctx, conn, o.publication(), o.outboxTable())
	})
	return applied, err
}

// URL connects to the database at url and runs Run. Errors carry no
// connection string.
func URL(ctx context.Context, url string, o Options) ([]string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	return Run(ctx, conn, o)
}

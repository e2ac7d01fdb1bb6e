package backfill

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/cdc/outboxscan"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// A new slot is created with an exported snapshot: exactly the transactions
// committed before the slot's consistent point are visible in it, and
// exactly the later ones are streamed from the slot. Publishing the rows the
// snapshot sees, waiting for their acks, and only then streaming therefore
// publishes every row once, with each key's older rows before its newer ones.

// snapshotName is the shape of a name CREATE_REPLICATION_SLOT exports
// (e.g. 00000003-00000002-1); SET TRANSACTION SNAPSHOT takes no parameter.
var snapshotName = regexp.MustCompile(`^[0-9A-Fa-f-]{1,64}$`)

// Snapshot is a read-only transaction that sees what a new slot's exported
// snapshot saw.
type Snapshot struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

// Import opens a connection with connect and imports the exported snapshot
// name on it; Close closes it. It must run before the replication
// connection that exported the snapshot issues another command: the export
// ends with that command.
func Import(ctx context.Context, name string, connect func(context.Context) (*pgx.Conn, error)) (*Snapshot, error) {
	if !snapshotName.MatchString(name) {
		return nil, fmt.Errorf("unexpected snapshot name %q", name)
	}
	conn, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err == nil {
		_, err = tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+name+"'")
	}
	if err != nil {
		closeConn(ctx, conn)
		return nil, fmt.Errorf("import snapshot %s of the new slot: %w", name, err)
	}
	return &Snapshot{conn: conn, tx: tx}, nil
}

// Tx is the snapshot's transaction, to read the rows it sees.
func (s *Snapshot) Tx() pgx.Tx { return s.tx }

// Close ends the snapshot's transaction and closes its connection.
func (s *Snapshot) Close(ctx context.Context) {
	_ = s.tx.Rollback(context.WithoutCancel(ctx))
	closeConn(ctx, s.conn)
}

// closeConn closes conn, bounded, even when ctx ended.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = conn.Close(cctx)
}

// WarnUnpublished tells the operator about outbox rows committed before
// slot, created without a backfill: the slot will never deliver them. q
// reads what the slot's snapshot saw.
func WarnUnpublished(ctx context.Context, q outboxscan.Querier, cat *outbox.Catalog, slot string, log *slog.Logger) {
	n, oldest, err := outboxscan.Count(ctx, q, cat)
	if err != nil {
		log.Warn("new replication slot: could not count the outbox rows committed before it, which it will not deliver", "err", err)
		return
	}
	if n == 0 {
		return
	}
	log.Warn(fmt.Sprintf("new replication slot %s: %d outbox rows committed before it (oldest created_at %s) will not be published; "+
		"to publish them in order before the stream: stop the relay, run eventforge slot drop --slot %s --yes, and start eventforge cdc run with --backfill-since TIME or --backfill-all",
		slot, n, oldest.UTC().Format(time.RFC3339), slot), "unpublished_rows", n)
}

package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNotPublished stops a relay whose publication does not carry the outbox
// table's inserts under the table's own name: every insert would decode as
// another table's row, be skipped, and the slot would confirm past it.
var ErrNotPublished = errors.New("outbox table is not in the publication")

// publicationInfo is what the relay needs to know of the publication and the
// outbox table before streaming.
type publicationInfo struct {
	tableExists bool
	partitioned bool // relkind 'p'
	partitionOf string
	pubInsert   bool
	viaRoot     bool
	published   bool // schema.table is in pg_publication_tables
}

// checkCoverage refuses to stream when the publication would deliver the
// outbox table's inserts under another name, or not at all: a renamed
// table, a wrong --outbox-table, a publication without inserts, a
// partitioned outbox published per partition, or a partition of a table
// published via its root.
func checkCoverage(ctx context.Context, conn *pgx.Conn, publication, schema, table string) error {
	info, err := readPublicationInfo(ctx, conn, publication, schema, table)
	if err != nil {
		return err
	}
	return coverageError(info, publication, schema+"."+table)
}

func readPublicationInfo(ctx context.Context, conn *pgx.Conn, publication, schema, table string) (publicationInfo, error) {
	var info publicationInfo
	var parent *string
	err := conn.QueryRow(ctx, `SELECT c.relkind = 'p',
			(SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid AND c.relispartition)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, schema, table).Scan(&info.partitioned, &parent)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return info, nil
	case err != nil:
		return info, fmt.Errorf("read outbox table %s.%s: %w", schema, table, err)
	}
	info.tableExists, info.partitionOf = true, deref(parent)
	err = conn.QueryRow(ctx, `SELECT p.pubinsert, p.pubviaroot,
			EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3)
		FROM pg_publication p WHERE p.pubname = $1`, publication, schema, table).
		Scan(&info.pubInsert, &info.viaRoot, &info.published)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, fatalf(ErrNoPublication, "publication %s does not exist: run eventforge migrate", publication)
	}
	if err != nil {
		return info, fmt.Errorf("read publication %s: %w", publication, err)
	}
	return info, nil
}

// coverageError is the one-line refusal for info, or nil when the
// publication delivers the table's inserts under its own name.
func coverageError(info publicationInfo, publication, table string) error {
	switch {
	case !info.tableExists:
		return fatalf(ErrNotPublished, "outbox table %s does not exist: check --outbox-table", table)
	case !info.pubInsert:
		return fatalf(ErrNotPublished, "publication %s does not publish inserts, so no outbox event would reach the relay: ALTER PUBLICATION %s SET (publish = 'insert')",
			publication, publication)
	case info.partitioned && !info.viaRoot:
		return fatalf(ErrNotPublished, "outbox table %s is partitioned but publication %s has publish_via_partition_root = false, so its rows would arrive under the partitions' names and be skipped: ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
			table, publication, publication)
	case !info.published && info.partitionOf != "":
		return fatalf(ErrNotPublished, "outbox table %s is a partition of %s, and publication %s publishes its rows under the parent's name: set --outbox-table %s",
			table, info.partitionOf, publication, info.partitionOf)
	case !info.published:
		return fatalf(ErrNotPublished, "outbox table %s is not in publication %s, so the relay would skip every event: check --outbox-table, or ALTER PUBLICATION %s ADD TABLE %s",
			table, publication, publication, table)
	}
	return nil
}

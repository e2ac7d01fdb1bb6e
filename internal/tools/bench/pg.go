package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/internal/shared/migrate"
)

// publication is the one `eventforge migrate` creates.
const publication = "eventforge_outbox"

// uniqueName is a short random lowercase identifier: prefix_<10 hex>.
func uniqueName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// database is a fresh, migrated database on the cluster of the admin URL,
// so one measurement never sees another's rows, slots or WAL retention.
type database struct {
	name     string
	url      string
	adminURL string
	pool     *pgxpool.Pool
}

// newDatabase creates and migrates a database named bench_<random>.
func newDatabase(ctx context.Context, adminURL string) (*database, error) {
	name := uniqueName("bench")
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	db := &database{name: name, adminURL: adminURL}
	if db.url, err = withDatabase(adminURL, name); err != nil {
		db.drop()
		return nil, err
	}
	if err := migrateDB(ctx, db.url); err != nil {
		db.drop()
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	if db.pool, err = pgxpool.New(ctx, db.url); err != nil {
		db.drop()
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	return db, nil
}

// withDatabase replaces the database of a postgres:// URL, keeping the rest.
func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("the bench needs a postgres:// URL, got an unparsable one")
	}
	u.Path = "/" + name
	return u.String(), nil
}

func migrateDB(ctx context.Context, url string) error {
	_, err := migrate.URL(ctx, url, migrate.Options{Demo: true}) // the load writes orders
	return err
}

// drop ends the database's walsenders, drops its slots (they would retain
// WAL for the whole cluster) and the database. Best effort: it runs on the
// way out of failed stages too.
func (db *database) drop() {
	if db.pool != nil {
		db.pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, db.adminURL)
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		WHERE database = $1 AND active_pid IS NOT NULL`, db.name)
	for range 100 {
		_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE database = $1 AND NOT active`, db.name)
		var left int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db.name).Scan(&left)
		if err == nil && left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)")
}

// writerPool opens conns connections to the database; async turns
// synchronous_commit off for them.
func (db *database) writerPool(ctx context.Context, conns int, async bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = int32(conns), int32(conns)
	cfg.ConnConfig.RuntimeParams["application_name"] = "eventforge-bench"
	if async {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect writers: %w", err)
	}
	return pool, nil
}

// createSlot creates a pgoutput slot in the database. PostgreSQL makes it
// consistent once the cluster's running transactions end, so it may wait.
func (db *database) createSlot(ctx context.Context, slot string) error {
	_, err := db.pool.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
	if err != nil {
		return fmt.Errorf("create slot %s: %w", slot, err)
	}
	return nil
}

// currentLSN is pg_current_wal_lsn().
func (db *database) currentLSN(ctx context.Context) (pglogrepl.LSN, error) {
	return db.lsn(ctx, "SELECT pg_current_wal_lsn()::text")
}

// confirmed is the slot's confirmed_flush_lsn (zero when unset).
func (db *database) confirmed(ctx context.Context, slot string) (pglogrepl.LSN, error) {
	return db.lsn(ctx, "SELECT coalesce(confirmed_flush_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1", slot)
}

func (db *database) lsn(ctx context.Context, query string, args ...any) (pglogrepl.LSN, error) {
	var s string
	if err := db.pool.QueryRow(ctx, query, args...).Scan(&s); err != nil {
		return 0, fmt.Errorf("read LSN: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}

// slotLag is pg_current_wal_lsn() - confirmed_flush_lsn of slot, in bytes.
func (db *database) slotLag(ctx context.Context, slot string) (int64, error) {
	var lag int64
	err := db.pool.QueryRow(ctx, `SELECT coalesce((pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, 0)
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
	return lag, err
}

// endMarker finishes a batch of writes: it waits until the WAL is flushed up
// to the insert position (writers may commit asynchronously), then writes a
// non-transactional logical message past it, so pg_recvlogical --endpos has
// a record at or beyond the end to stop on. The relay ignores messages with
// other prefixes than its heartbeat. The end is the insert position, not
// pg_current_wal_lsn (the write position): with synchronous_commit off the
// last commit records may still be in the WAL buffers, past the write
// position, and a drain that stopped there would leave them out.
func (db *database) endMarker(ctx context.Context) (pglogrepl.LSN, error) {
	end, err := db.lsn(ctx, "SELECT pg_current_wal_insert_lsn()::text")
	if err != nil {
		return 0, err
	}
	err = poll(ctx, time.Minute, 20*time.Millisecond, "WAL flushed", func() (bool, error) {
		flushed, err := db.lsn(ctx, "SELECT pg_current_wal_flush_lsn()::text")
		return flushed >= end, err
	})
	if err != nil {
		return 0, err
	}
	if _, err := db.pool.Exec(ctx, "SELECT pg_logical_emit_message(false, 'eventforge.bench.end', '')"); err != nil {
		return 0, fmt.Errorf("write end marker: %w", err)
	}
	return end, nil
}

// waitConfirmed polls the slot every interval until its confirmed_flush_lsn
// reaches end.
func (db *database) waitConfirmed(ctx context.Context, slot string, end pglogrepl.LSN, timeout time.Duration, alive func() error) error {
	return poll(ctx, timeout, 50*time.Millisecond, "slot "+slot+" confirmed at "+end.String(), func() (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		c, err := db.confirmed(ctx, slot)
		return c >= end, err
	})
}

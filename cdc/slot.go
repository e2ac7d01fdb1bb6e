package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventforge/eventforge/cdc/topics"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	ipg "github.com/eventforge/eventforge/internal/shared/pgconn"
	"github.com/eventforge/eventforge/internal/shared/slots"
)

// Errors that stop the relay instead of being retried: retrying cannot fix
// them, and some (a lost or missing slot) must never be papered over.
var (
	ErrNoPublication = errors.New("publication does not exist")
	ErrSlotMissing   = errors.New("replication slot is missing")
	ErrSlotLost      = errors.New("replication slot was invalidated")
	ErrSlotMismatch  = errors.New("replication slot does not fit")
	// ErrTopicMissing no longer stops the relay: it is the reason of an
	// event set aside (see package topics).
	ErrTopicMissing = topics.ErrMissing
)

// FatalError marks an error the relay does not retry.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

func fatal(err error) error { return &FatalError{Err: err} }

// fatalf is a FatalError that matches kind with errors.Is but reads only as
// its message, without the kind repeated in front.
func fatalf(kind error, format string, args ...any) error {
	return fatal(&kindError{kind: kind, msg: fmt.Sprintf(format, args...)})
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// connectSQL opens a normal connection; its error never repeats the password.
func connectSQL(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := ipg.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "eventforge-cdc"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(fmt.Errorf("connect to PostgreSQL %s: %w", ipg.Redact(url), err))
	}
	return conn, nil
}

// connectError makes errors that retrying cannot fix fatal: bad credentials,
// a missing database, a role without the replication privilege, a server
// certificate that does not verify.
func connectError(err error) error {
	if permanentConnectError(err) {
		return fatal(err)
	}
	return err
}

// connectReplication opens a logical replication connection
// (replication=database), which speaks the walsender protocol.
func connectReplication(ctx context.Context, url string) (*pgconn.PgConn, error) {
	cfg, err := ipg.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc := cfg.Config.Copy()
	pc.RuntimeParams["replication"] = "database"
	pc.RuntimeParams["application_name"] = "eventforge-cdc"
	pc.BuildFrontend = bufferedFrontend
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, connectError(fmt.Errorf("open replication connection to %s: %w", ipg.Redact(url), err))
	}
	return conn, nil
}

func checkPublication(ctx context.Context, conn *pgx.Conn, name string) error {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", name).Scan(&ok)
	if err != nil {
		return fmt.Errorf("check publication: %w", err)
	}
	if !ok {
		return fatalf(ErrNoPublication, "publication %s does not exist: run eventforge migrate", name)
	}
	return nil
}

// slotState is a row of pg_replication_slots.
type slotState struct {
	exists    bool
	plugin    string
	slotType  string
	database  string
	confirmed pglogrepl.LSN // zero when NULL
	walStatus string
	activePID int32 // zero when inactive
	failover  bool  // a PostgreSQL 17 failover slot
}

// readSlot reads the slot through internal/shared/slots, the one home of the
// slot queries; a missing slot is a slotState that does not exist.
func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotState, error) {
	got, err := slots.Status(ctx, conn, slot)
	if errors.Is(err, slots.ErrSlotNotFound) {
		return slotState{}, nil
	}
	if err != nil {
		return slotState{}, err
	}
	s := slotState{exists: true, plugin: got.Plugin, slotType: got.Type, database: got.Database,
		walStatus: got.WALStatus, activePID: got.ActivePID, failover: got.Failover}
	if got.ConfirmedFlushLSN != "" {
		if s.confirmed, err = pglogrepl.ParseLSN(got.ConfirmedFlushLSN); err != nil {
			return s, fmt.Errorf("parse confirmed_flush_lsn of slot %s: %w", slot, err)
		}
	}
	return s, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// stateRow is this database's memory of having streamed from a slot.
type stateRow struct {
	exists      bool
	confirmed   string
	updatedAt   time.Time
	recoverFrom time.Time // where a recovery republishes from (slots.RelayRecord.RecoverFrom)
}

func readState(ctx context.Context, conn *pgx.Conn, slot string) (stateRow, error) {
	rec, ok, err := slots.ReadRelayRecord(ctx, conn, slot)
	return stateRow{exists: ok, confirmed: rec.ConfirmedLSN, updatedAt: rec.UpdatedAt, recoverFrom: rec.RecoverFrom()}, err
}

// writeState records a confirmed position; it never moves the row backwards.
func writeState(ctx context.Context, conn *pgx.Conn, slot string, lsn pglogrepl.LSN) error {
	return slots.WriteRelayState(ctx, conn, slot, lsn.String())
}

// recovery is the operator's way out of a slot that cannot be used: a new
// slot whose snapshot backfill covers everything since the last
// confirmation, published before the new slot's stream, so each key keeps
// its order. since is relay_state's recover_since (the start of the oldest
// transaction open before the last confirmed commit), or an hour before the
// last confirmation when the relay could not measure it: rows carry their
// transaction's start time, duplicates are harmless, gaps are not.
func recovery(slot string, since time.Time) string {
	return fmt.Sprintf("recover: eventforge slot drop --slot %s --yes (drops the slot and its relay_state row), then eventforge cdc run --backfill-since %s (creates a new slot and publishes the rows since then from its snapshot before streaming; event IDs are unchanged, so consumers dedupe)",
		slot, since.UTC().Format(time.RFC3339)) // whole seconds, rounded down
}

// prepareSlot checks the slot (creating it on first use, with the backfill
// the configuration asks for) and returns the position streaming resumes
// from: its confirmed_flush_lsn, or a new slot's consistent point.
func (r *Relay) prepareSlot(ctx context.Context, sqlConn *pgx.Conn, repl *pgconn.PgConn) (pglogrepl.LSN, error) {
	slot := r.cfg.Slot
	failover, err := r.failoverFor(ctx, sqlConn)
	if err != nil {
		return 0, err
	}
	s, err := readSlot(ctx, sqlConn, slot)
	if err != nil {
		return 0, err
	}
	st, err := readState(ctx, sqlConn, slot)
	if err != nil {
		return 0, err
	}
	if s.exists {
		if err := checkSlotKind(ctx, sqlConn, s, slot); err != nil {
			return 0, err
		}
	}
	if st.exists && st.confirmed == backfillPending.String() {
		return r.redoBackfill(ctx, sqlConn, repl, s, failover)
	}
	if !s.exists {
		if st.exists {
			return 0, fatalf(ErrSlotMissing, "replication slot %s is missing although this relay confirmed %s on it (last at %s); it is not recreated silently because events after that point would be skipped; %s",
				slot, st.confirmed, st.updatedAt.UTC().Format(time.RFC3339), recovery(slot, st.recoverFrom))
		}
		return r.createSlot(ctx, sqlConn, repl, failover)
	}
	return r.resumeSlot(ctx, repl, s, st, failover)
}

// resumeSlot checks an existing slot that no backfill is pending on and
// returns its confirmed position, making it a failover slot first when
// failover asks for one.
func (r *Relay) resumeSlot(ctx context.Context, repl *pgconn.PgConn, s slotState, st stateRow, failover bool) (pglogrepl.LSN, error) {
	if s.walStatus == "lost" || s.confirmed == 0 {
		since := st.recoverFrom
		if !st.exists {
			since = time.Now().Add(-slots.RecoveryMargin)
		}
		return 0, fatalf(ErrSlotLost, "replication slot %s can no longer stream (wal_status %q: the server removed WAL it needed, see max_slot_wal_keep_size); %s",
			r.cfg.Slot, s.walStatus, recovery(r.cfg.Slot, since))
	}
	if _, asked := r.cfg.backfillRange(); asked {
		r.log.Info("the slot exists: the backfill applies only when the relay creates the slot", "confirmed", s.confirmed)
	}
	if failover && !s.failover {
		if err := r.convertSlot(ctx, repl); err != nil {
			return 0, err
		}
	}
	return s.confirmed, nil
}

// checkSlotKind refuses a slot of another plugin, type or database. An
// existing pgoutput slot, such as the one a stopped Debezium connector
// leaves, is taken over at its confirmed_flush_lsn: the stream resumes
// exactly where the last reader's confirmations left it.
func checkSlotKind(ctx context.Context, sqlConn *pgx.Conn, s slotState, slot string) error {
	if s.slotType != "logical" {
		return fatalf(ErrSlotMismatch, "replication slot %s is a %s slot, want a logical slot of plugin pgoutput", slot, s.slotType)
	}
	if s.plugin != "pgoutput" {
		return fatalf(ErrSlotMismatch, "replication slot %s decodes with plugin %s, but the relay reads pgoutput only: it cannot take this slot over (a Debezium connector's slot can be taken over when it ran with plugin.name=pgoutput); choose another --slot, which the relay creates",
			slot, s.plugin)
	}
	var db string
	if err := sqlConn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return fmt.Errorf("read current database: %w", err)
	}
	if s.database != db {
		return fatalf(ErrSlotMismatch, "replication slot %s belongs to database %s, not %s: choose another --slot", slot, s.database, db)
	}
	return nil
}

// walSenderTimeout reads the server's wal_sender_timeout; zero means disabled.
func walSenderTimeout(ctx context.Context, conn *pgx.Conn) (time.Duration, error) {
	var ms int64
	if err := conn.QueryRow(ctx, "SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout'").Scan(&ms); err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// statusInterval is docs/design.md#status-cadence's bound: at most 10s and at most half the
// server's wal_sender_timeout.
func statusInterval(configured, walSenderTimeout time.Duration) time.Duration {
	d := maxStatusInterval
	if configured > 0 {
		d = configured
	}
	if walSenderTimeout > 0 && walSenderTimeout/2 < d {
		d = walSenderTimeout / 2
	}
	return d
}

// pgErrorCode is the SQLSTATE of a server error, or "".
func pgErrorCode(err error) (string, *pgconn.PgError) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe
	}
	return "", nil
}

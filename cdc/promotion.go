package cdc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/shared/slots"
)

// recoveryRetry is how often a relay that reached a server in recovery (a
// standby, as on a multi-host URL without target_session_attrs, or a
// primary being demoted) tries again: a promotion takes seconds, and the
// try costs one query.
const recoveryRetry = time.Second

// recoveryError ends a session that reached a server in recovery. It is
// not counted as a session error: the relay waits for a primary.
type recoveryError struct {
	server string
	cause  error
}

func (e *recoveryError) Error() string {
	return fmt.Sprintf("PostgreSQL at %s is a standby in recovery: no slot can be streamed from it", e.server)
}

func (e *recoveryError) Unwrap() error { return e.cause }

// checkPrimary returns a *recoveryError when conn reached a server in
// recovery.
func checkPrimary(ctx context.Context, conn *pgx.Conn) error {
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return fmt.Errorf("read pg_is_in_recovery: %w", err)
	}
	if inRecovery {
		cfg := conn.Config()
		return &recoveryError{server: fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)}
	}
	return nil
}

// noPrimary turns a connection refused because no host of a multi-host
// URL with target_session_attrs=read-write is a primary (one is being
// promoted, or a demoted one still answers) into a *recoveryError.
func noPrimary(err error) error {
	if errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return &recoveryError{server: "every host of the URL", cause: err}
	}
	return err
}

// serverIdentity names the server a connection reached: its address and
// the start time of its postmaster. A promoted standby is another server
// than the primary it replaced, and a restarted server another run of it;
// a position confirmed on one is not a position of the other (the same LSN
// can name different WAL on another timeline).
func serverIdentity(ctx context.Context, conn *pgx.Conn) (string, error) {
	var id string
	err := conn.QueryRow(ctx, `SELECT coalesce(host(inet_server_addr()), 'local') || ':' || coalesce(inet_server_port()::text, '') ||
		' since ' || pg_postmaster_start_time()::text`).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("identify the server: %w", err)
	}
	return id, nil
}

// serverPos is the server on which the relay confirms its slot now.
type serverPos struct {
	server atomic.Pointer[string] // nil between sessions
}

// beginPosition starts a session's positions at start, on the server conn
// reached: what an earlier session confirmed (on another server, another
// timeline) is never written as this server's.
func (r *Relay) beginPosition(ctx context.Context, conn *pgx.Conn, start pglogrepl.LSN) error {
	server, err := serverIdentity(ctx, conn)
	if err != nil {
		return err
	}
	r.pos.server.Store(nil)
	r.confirmed.Store(uint64(start))
	r.pos.server.Store(&server)
	return nil
}

// checkServer refuses a server that cannot serve the slot: one without
// logical WAL or without the publication (fatal), or in recovery (waited
// for).
func checkServer(ctx context.Context, conn *pgx.Conn, publication string) error {
	if err := checkWalLevel(ctx, conn); err != nil {
		return err
	}
	if err := checkPrimary(ctx, conn); err != nil {
		return err
	}
	return checkPublication(ctx, conn, publication)
}

// askFailoverCheck asks the maintenance loop for a failover check at its
// next slot sampling (one request pending at most).
func (r *Relay) askFailoverCheck() {
	select {
	case r.checkNow <- struct{}{}:
	default:
	}
}

// written is what relay_state holds from this relay: the position and the
// server it was written to.
type written struct {
	lsn     pglogrepl.LSN
	server  string
	samples samples // of server: the margins of the positions to come
}

// writeState records the session's confirmed position in relay_state when
// conn reached the session's server and the position moved since the last
// write there.
func (r *Relay) writeState(ctx context.Context, conn *pgx.Conn, w *written) error {
	server := r.pos.server.Load()
	lsn := pglogrepl.LSN(r.confirmed.Load())
	if server == nil {
		return nil
	}
	on, err := serverIdentity(ctx, conn)
	if err != nil {
		return err
	}
	if on != *server {
		// For the moment between a promotion and the session on the
		// promoted server: its position is not this server's.
		r.log.Debug("relay_state not written: the maintenance connection reached another server than the stream", "on", on, "stream", *server)
		return nil
	}
	if w.server != on {
		*w = written{server: on}
	}
	if s, ok, err := sampleTxns(ctx, conn); err != nil {
		return err
	} else if ok {
		w.samples = w.samples.add(s)
	}
	var since *time.Time
	if ss, t, ok := w.samples.since(lsn); ok {
		w.samples, since = ss, &t
	}
	if lsn <= w.lsn {
		return nil // sampled only
	}
	if err := slots.WriteRelayStateSince(ctx, conn, r.cfg.Slot, lsn.String(), since); err != nil {
		return err
	}
	w.lsn = lsn
	return nil
}

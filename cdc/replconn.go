package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// replicationConn is what a stream needs of the replication connection: the
// protocol seam between the stream loop and the walsender, so the loop's
// keepalive answers, backpressure and drain are testable without a server.
type replicationConn interface {
	// ReceiveMessage returns the next message, or an error wrapping
	// errReceiveTimeout when the read deadline passed without one.
	ReceiveMessage(ctx context.Context) (pgproto3.BackendMessage, error)
	// SendStandbyStatus sends a standby status update.
	SendStandbyStatus(ctx context.Context, u pglogrepl.StandbyStatusUpdate) error
	// SetReadDeadline and SetWriteDeadline bound the next reads and writes
	// on the socket; the zero time removes the bound.
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// errReceiveTimeout is a receive that reached its read deadline: no message
// yet, the connection is fine.
var errReceiveTimeout = errors.New("no message before the read deadline")

// pgReplConn is the replicationConn of a real walsender connection.
type pgReplConn struct{ conn *pgconn.PgConn }

func (c pgReplConn) ReceiveMessage(ctx context.Context) (pgproto3.BackendMessage, error) {
	msg, err := c.conn.ReceiveMessage(ctx)
	if err != nil && pgconn.Timeout(err) {
		return nil, fmt.Errorf("%w: %w", errReceiveTimeout, err)
	}
	return msg, err
}

func (c pgReplConn) SendStandbyStatus(ctx context.Context, u pglogrepl.StandbyStatusUpdate) error {
	return pglogrepl.SendStandbyStatusUpdate(ctx, c.conn, u)
}

func (c pgReplConn) SetReadDeadline(t time.Time) error  { return c.conn.Conn().SetReadDeadline(t) }
func (c pgReplConn) SetWriteDeadline(t time.Time) error { return c.conn.Conn().SetWriteDeadline(t) }

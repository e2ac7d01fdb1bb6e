package cdc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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

// replicationReadBuffer is how much one read of the replication socket can
// take. pgproto3 reads into an 8 KiB buffer, often less than that (what is
// left of it): a backlog of ~300-byte rows then costs a read system call
// every dozen or so messages. One read now takes what the socket holds, up
// to this.
const replicationReadBuffer = 128 << 10

// bufferedFrontend is the replication connection's protocol reader
// (pgconn.Config.BuildFrontend): pgproto3's, reading through a buffer of
// replicationReadBuffer bytes. A read deadline's timeout reaches pgconn as
// before (the buffer passes a read's error on once, after the bytes it got).
func bufferedFrontend(r io.Reader, w io.Writer) *pgproto3.Frontend {
	return pgproto3.NewFrontend(bufio.NewReaderSize(r, replicationReadBuffer), w)
}

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

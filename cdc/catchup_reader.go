package cdc

import (
	"bufio"
	"io"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Reading a backlog in few, large reads. The WAL sender writes each message
// to the socket as soon as it can; a relay that reads each one as it comes
// pays a system call and a wake-up per message, and on a machine both share
// that leaves the WAL sender less CPU, so messages keep coming one by one.
// While the stream catches up on a backlog (catchUp, see batcher), a read
// that came back short is followed by a pause of catchUpReadPause before the
// next one, so what the WAL sender writes meanwhile arrives in one read.
// Live streams are read as before.
const (
	catchUpReadPause = time.Millisecond
	// catchUpShortRead: a read of fewer bytes than this (a few
	// transactions' messages) is short. A relay busy with a fast backlog
	// finds far more waiting after each batch it processed, and never pauses.
	catchUpShortRead = 8 << 10
	// replReadBuffer is the replication connection's read buffer: large
	// enough that a paused read takes a millisecond of a fast backlog.
	replReadBuffer = 256 << 10
)

// catchUpReader pauses reads of a catching-up stream after a short read.
type catchUpReader struct {
	r       io.Reader
	catchUp *atomic.Bool
	pause   func(time.Duration)
	short   bool // the previous read filled less than half of its buffer
}

func (c *catchUpReader) Read(p []byte) (int, error) {
	if c.short && c.catchUp.Load() {
		c.pause(catchUpReadPause)
	}
	n, err := c.r.Read(p)
	c.short = n < catchUpShortRead
	return n, err
}

// catchUpFrontend builds the replication connection's protocol reader: a
// large buffer over a catchUpReader.
func catchUpFrontend(catchUp *atomic.Bool) func(io.Reader, io.Writer) *pgproto3.Frontend {
	return func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		cr := &catchUpReader{r: r, catchUp: catchUp, pause: time.Sleep}
		return pgproto3.NewFrontend(bufio.NewReaderSize(cr, replReadBuffer), w)
	}
}

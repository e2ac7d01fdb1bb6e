package api

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// failingWriter fails every insertEvent after a real insertOrder: the
// failure lands between the two inserts of one transaction.
type failingWriter struct {
	rowWriter
	ordersInserted atomic.Int64
}

var errInjected = errors.New("injected failure between the inserts")

func (f *failingWriter) insertOrder(ctx context.Context, tx pgx.Tx, r orderRequest) (time.Time, error) {
	t, err := f.rowWriter.insertOrder(ctx, tx, r)
	if err == nil {
		f.ordersInserted.Add(1)
	}
	return t, err
}

func (f *failingWriter) insertEvent(context.Context, pgx.Tx, uuid.UUID, orderRequest, []byte, []byte) error {
	return errInjected
}

// gateWriter holds the first transaction between its two inserts until
// release is closed (or the request's context ends), so a test can act while
// that transaction is open.
type gateWriter struct {
	rowWriter
	calls   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newGateWriter() *gateWriter {
	return &gateWriter{rowWriter: sqlWriter{}, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateWriter) insertEvent(ctx context.Context, tx pgx.Tx, id uuid.UUID, r orderRequest, payload, headers []byte) error {
	if g.calls.Add(1) == 1 {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.rowWriter.insertEvent(ctx, tx, id, r, payload, headers)
}

package backfill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/outboxscan"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// producer is the relay's side of the seam, for these tests: it records
// the rows it is handed and acks each from another goroutine, as the
// relay's producer session does once the broker acknowledged it.
type producer struct {
	ackAfter time.Duration
	failAt   int   // > 0: the failAt-th row fails the production instead
	failWith error // with this cause
	startErr error

	mu      sync.Mutex
	ids     []uuid.UUID
	maxHeld int // the most rows in flight at once
	closed  bool
}

func (p *producer) Start(_ context.Context, tr *ack.Tracker, fail context.CancelCauseFunc) (Feed, error) {
	if p.startErr != nil {
		return nil, p.startErr
	}
	return &feed{p: p, tr: tr, fail: fail}, nil
}

type feed struct {
	p    *producer
	tr   *ack.Tracker
	fail context.CancelCauseFunc
}

func (f *feed) Send(_ context.Context, row *outbox.Row) error {
	p := f.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, row.Event.ID)
	tok := f.tr.Add(100)
	if n, _ := f.tr.InFlight(); n > p.maxHeld {
		p.maxHeld = n
	}
	if p.failAt > 0 && len(p.ids) == p.failAt {
		f.fail(p.failWith) // never acked
		return nil
	}
	time.AfterFunc(p.ackAfter, func() { f.tr.Ack(tok) })
	return nil
}

func (f *feed) Close() {
	f.p.mu.Lock()
	f.p.closed = true
	f.p.mu.Unlock()
}

// outboxDB is a fresh database with n outbox rows, created a second apart
// (the oldest first), and the catalog of its outbox table.
func outboxDB(t *testing.T, n int) (*pgx.Conn, string, *outbox.Catalog, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	url := testenv.Shared(t).NewDatabase(t)
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
		if _, err := db.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ($1, 'orders', $2, 'order.created', '{}', now() - make_interval(secs => $3))`, ids[i], fmt.Sprint("k", i%3), n-i); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := outbox.DefaultMapping().Check(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return db, url, cat, ids
}

func job(cat *outbox.Catalog, maxEvents int) Job {
	return Job{Slot: "test", Catalog: cat, ConsistentPoint: pglogrepl.LSN(0x1000), MaxInFlightEvents: maxEvents, MaxInFlightBytes: 1 << 20}
}

func TestRunPublishesEveryRowInOrderWithinTheWindow(t *testing.T) {
	t.Parallel()
	db, _, cat, ids := outboxDB(t, 40)
	p := &producer{ackAfter: 5 * time.Millisecond}
	if err := Run(context.Background(), job(cat, 4), db, p); err != nil {
		t.Fatalf("Run = %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if fmt.Sprint(p.ids) != fmt.Sprint(ids) {
		t.Fatalf("rows handed over %v,\nwant in created_at order %v", p.ids, ids)
	}
	if p.maxHeld > 4 {
		t.Errorf("%d rows in flight at once; the window is 4", p.maxHeld)
	}
	if !p.closed {
		t.Errorf("the producer session was not closed")
	}
}

func TestRunEndsWithTheProductionError(t *testing.T) {
	t.Parallel()
	db, _, cat, _ := outboxDB(t, 10)
	errBroker := errors.New("the broker said no")
	tests := []struct {
		name string
		p    *producer
		want error
	}{
		{"a production error", &producer{failAt: 3, failWith: errBroker}, errBroker},
		{"the session cannot start", &producer{startErr: errBroker}, errBroker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), job(cat, 100), db, tt.p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRunReturnsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	db, _, cat, _ := outboxDB(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	// Acked long after the backfill gave up: Run must not wait for it.
	p := &producer{ackAfter: time.Hour}
	time.AfterFunc(200*time.Millisecond, cancel)
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, job(cat, 100), db, p) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return %v after its context ended", time.Since(began))
	}
}

// TestImportSeesWhatTheSnapshotSaw: rows committed after the export are
// invisible in the imported snapshot, as a new slot's later rows are left
// to its stream.
func TestImportSeesWhatTheSnapshotSaw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url, cat, _ := outboxDB(t, 3)
	exporter, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer exporter.Close(ctx)
	tx, err := exporter.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var name string
	if err := tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'orders', 'later', 'order.created', '{}')`, uuid.New()); err != nil {
		t.Fatal(err)
	}
	snap, err := Import(ctx, name, func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, url) })
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	n, _, err := outboxscan.Count(ctx, snap.Tx(), cat)
	if err != nil || n != 3 {
		t.Fatalf("the snapshot counts %d rows (%v), want the 3 committed before its export", n, err)
	}
	var logs bytes.Buffer
	WarnUnpublished(ctx, snap.Tx(), cat, "s1", slog.New(slog.NewTextHandler(&logs, nil)))
	if !strings.Contains(logs.String(), "unpublished_rows=3") || !strings.Contains(logs.String(), "slot drop --slot s1") {
		t.Errorf("warning = %q, want the 3 rows and how to publish them", logs.String())
	}
}

func TestImportRefusesAName(t *testing.T) {
	for _, name := range []string{"", "x'; DROP TABLE outbox; --", strings.Repeat("0", 65)} {
		_, err := Import(context.Background(), name, func(context.Context) (*pgx.Conn, error) {
			t.Fatalf("Import(%q) connected", name)
			return nil, nil
		})
		if err == nil || !strings.Contains(err.Error(), "unexpected snapshot name") {
			t.Errorf("Import(%q) = %v, want an unexpected snapshot name", name, err)
		}
	}
}

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ledger is every write of the run in commit order per key, with outcomes.
type ledger struct {
	mu     sync.Mutex
	writes []Write
	byKey  map[int]string // index of an API write whose event id is unknown -> its order id
}

func (l *ledger) add(outcome Outcome, key string, ids ...uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.writes = append(l.writes, Write{ID: id, Key: key, Outcome: outcome})
	}
}

func (l *ledger) addRows(outcome Outcome, keys []string, ids []uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		l.writes = append(l.writes, Write{ID: id, Key: keys[i], Outcome: outcome})
	}
}

func (l *ledger) addUnknownOrder(orderID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[int]string{}
	}
	l.byKey[len(l.writes)] = orderID
	l.writes = append(l.writes, Write{Key: orderID, Outcome: Unknown})
}

const insertEvents = `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
	SELECT u, 'orders', k, 'chaos.event', jsonb_build_object('n', n)
	FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS x(u, k, n)`

// sqlWriter writes outbox events with plain SQL on keys of its own, so the
// order of its commits is each key's commit order.
type sqlWriter struct {
	id    int
	url   string
	rng   *rand.Rand
	led   *ledger
	conn  *pgx.Conn
	stats *loadStats
}

type loadStats struct {
	mu                                             sync.Mutex
	single, multi, rollbacks, unknown, api, errors int
}

func (s *loadStats) inc(f *int) {
	s.mu.Lock()
	*f++
	s.mu.Unlock()
}

func (w *sqlWriter) run(ctx context.Context) {
	defer func() {
		if w.conn != nil {
			w.conn.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if w.conn == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := pgx.Connect(cctx, w.url)
			cancel()
			if err != nil {
				w.stats.inc(&w.stats.errors)
				pause(ctx, 300*time.Millisecond)
				continue
			}
			w.conn = c
		}
		if err := w.step(); err != nil {
			w.stats.inc(&w.stats.errors)
			w.conn.Close(context.Background())
			w.conn = nil
			pause(ctx, 100*time.Millisecond)
		}
		pause(ctx, time.Duration(w.rng.IntN(15))*time.Millisecond)
	}
}

func (w *sqlWriter) rows(n int) ([]uuid.UUID, []string) {
	ids, keys := make([]uuid.UUID, n), make([]string, n)
	for i := range n {
		ids[i] = uuid.New()
		keys[i] = "w" + strconv.Itoa(w.id) + "-k" + strconv.Itoa(w.rng.IntN(12))
	}
	return ids, keys
}

// step writes one transaction. Statements run without a deadline: a
// cancelled statement could still commit after the next one, which would
// make the ledger's order wrong.
func (w *sqlWriter) step() error {
	ctx := context.Background()
	switch r := w.rng.IntN(100); {
	case r < 45: // single row, autocommit
		ids, keys := w.rows(1)
		_, err := w.conn.Exec(ctx, insertEvents, ids, keys)
		return w.record(err, ids, keys, &w.stats.single)
	case r < 85: // multi-row transaction with an orders row
		ids, keys := w.rows(2 + w.rng.IntN(30))
		err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO orders (id, status) VALUES ($1, 'created')", uuid.NewString()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, insertEvents, ids, keys)
			return err
		})
		return w.record(err, ids, keys, &w.stats.multi)
	default: // deliberate rollback: no COMMIT is ever sent
		ids, keys := w.rows(1 + w.rng.IntN(5))
		w.led.addRows(RolledBack, keys, ids)
		w.stats.inc(&w.stats.rollbacks)
		tx, err := w.conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insertEvents, ids, keys); err != nil {
			return err
		}
		return tx.Rollback(ctx)
	}
}

// record puts the rows of a committing write in the ledger: committed
// (counted in kind) when it returned no error, unknown otherwise, since a
// lost connection can hide a commit.
func (w *sqlWriter) record(err error, ids []uuid.UUID, keys []string, kind *int) error {
	if err != nil {
		w.led.addRows(Unknown, keys, ids)
		w.stats.inc(&w.stats.unknown)
		return err
	}
	w.led.addRows(Committed, keys, ids)
	w.stats.inc(kind)
	return nil
}

// apiWriter creates orders through POST /orders; each order is its own key.
type apiWriter struct {
	base  string
	led   *ledger
	stats *loadStats
	n     int
}

func (a *apiWriter) run(ctx context.Context) {
	client := &http.Client{Timeout: 10 * time.Second}
	for ctx.Err() == nil {
		a.n++
		id := "api-" + strconv.Itoa(a.n) + "-" + uuid.NewString()[:8]
		body, _ := json.Marshal(map[string]any{"id": id, "customer": "chaos", "amount": 100 + a.n, "currency": "EUR"})
		resp, err := client.Post(a.base+"/orders", "application/json", bytes.NewReader(body))
		if err != nil {
			a.led.addUnknownOrder(id)
			a.stats.inc(&a.stats.unknown)
			pause(ctx, 200*time.Millisecond)
			continue
		}
		var out struct {
			EventID uuid.UUID `json:"event_id"`
		}
		derr := json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated && derr == nil:
			a.led.add(Committed, id, out.EventID)
			a.stats.inc(&a.stats.api)
		default: // 5xx, an unreadable answer: maybe committed
			a.led.addUnknownOrder(id)
			a.stats.inc(&a.stats.unknown)
			pause(ctx, 200*time.Millisecond)
		}
		pause(ctx, 20*time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// resolve settles every unknown outcome against the database, which is
// authoritative once the load has stopped: an event id (or an API order's
// event) present in the outbox committed, any other did not.
func (l *ledger) resolve(ctx context.Context, db *pgx.Conn) (resolvedCommitted int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []uuid.UUID
	var orders []string
	for i, w := range l.writes {
		if w.Outcome != Unknown {
			continue
		}
		if o, ok := l.byKey[i]; ok {
			orders = append(orders, o)
		} else {
			ids = append(ids, w.ID)
		}
	}
	present, err := presentEvents(ctx, db, ids)
	if err != nil {
		return 0, err
	}
	byOrder, err := eventsOfOrders(ctx, db, orders)
	if err != nil {
		return 0, err
	}
	for i := range l.writes {
		w := &l.writes[i]
		if w.Outcome != Unknown {
			continue
		}
		if o, ok := l.byKey[i]; ok {
			if id, ok := byOrder[o]; ok {
				w.ID = id
				present[id] = true
			}
		}
		if present[w.ID] && w.ID != uuid.Nil {
			w.Outcome = Committed
			resolvedCommitted++
		} else {
			w.Outcome = RolledBack
		}
	}
	return resolvedCommitted, nil
}

// presentEvents is which of ids the outbox holds.
func presentEvents(ctx context.Context, db *pgx.Conn, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := db.Query(ctx, "SELECT event_id FROM outbox WHERE event_id = ANY($1)", ids)
	if err != nil {
		return nil, fmt.Errorf("resolve unknown writes: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("resolve unknown writes: %w", err)
	}
	present := map[uuid.UUID]bool{}
	for _, id := range got {
		present[id] = true
	}
	return present, nil
}

// eventsOfOrders is the outbox event of each of the API's orders that has
// one.
func eventsOfOrders(ctx context.Context, db *pgx.Conn, orders []string) (map[string]uuid.UUID, error) {
	rows, err := db.Query(ctx, "SELECT aggregate_id, event_id FROM outbox WHERE aggregate_id = ANY($1)", orders)
	if err != nil {
		return nil, fmt.Errorf("resolve unknown orders: %w", err)
	}
	byOrder := map[string]uuid.UUID{}
	for rows.Next() {
		var o string
		var id uuid.UUID
		if err := rows.Scan(&o, &id); err != nil {
			return nil, err
		}
		byOrder[o] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resolve unknown orders: %w", err)
	}
	return byOrder, nil
}

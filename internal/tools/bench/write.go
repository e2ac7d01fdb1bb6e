package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The rows the bench writes look like the demo's: an order and its
// order.created event keyed by the order id, a ~100-byte JSON payload.

// bulkInsert writes outbox rows from..to (inclusive) in one transaction,
// row g keyed by g, or by g modulo $4 when $4 is positive.
const bulkInsert = `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
	SELECT gen_random_uuid(), 'orders', k, 'order.created',
	       jsonb_build_object('id', k, 'customer', 'c' || (g % 97), 'amount', g % 10000 + 1, 'currency', 'EUR')
	FROM generate_series($1::bigint, $2::bigint) AS g,
	     LATERAL (SELECT 'o-' || $3::text || '-' || CASE WHEN $4::bigint > 0 THEN g % $4::bigint ELSE g END AS k) AS key`

// singleTxn writes one order and its event in one transaction (one statement,
// one round trip).
const singleTxn = `WITH o AS (
	INSERT INTO orders (id, status, customer, amount, currency) VALUES ($1, 'created', $2, $3, 'EUR') RETURNING id, customer, amount)
	INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
	SELECT gen_random_uuid(), 'orders', id, 'order.created',
	       jsonb_build_object('id', id, 'customer', customer, 'amount', amount, 'currency', 'EUR') FROM o`

// singleTxnBlock commits one transaction per order from..to inside one DO
// block: thousands of separate transactions (each with its own commit record,
// as separate clients would write them) for one round trip.
const singleTxnBlock = `DO $$
BEGIN
	FOR g IN %d..%d LOOP
		INSERT INTO orders (id, status, customer, amount, currency)
		VALUES ('o-%s-' || g, 'created', 'c' || (g %% 97), g %% 10000 + 1, 'EUR');
		INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'orders', 'o-%s-' || g, 'order.created',
		        jsonb_build_object('id', 'o-%s-' || g, 'customer', 'c' || (g %% 97), 'amount', g %% 10000 + 1, 'currency', 'EUR'));
		COMMIT;
	END LOOP;
END $$`

// backlogShape is one transaction shape of the drain.
type backlogShape struct {
	Name       string
	RowsPerTxn int // 1: single-row transactions with an orders row
	Keys       int // above 0: rows cycle over this many keys (bulk only); 0: a key per row
}

// chunks splits events 1..total into pieces of at most size, calling fn for
// each from conns goroutines; the first error stops the rest.
func chunks(ctx context.Context, total, size, conns int, fn func(ctx context.Context, from, to int) error) error {
	var next atomic.Int64
	next.Store(1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				from := int(next.Add(int64(size))) - size
				if from > total {
					return
				}
				if err := fn(ctx, from, min(from+size-1, total)); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// writeBacklog writes total events in the shape; pool should commit
// asynchronously (the WAL is the same; the drain measures reading it).
func writeBacklog(ctx context.Context, pool *pgxpool.Pool, shape backlogShape, total, conns int, tag string) error {
	if shape.RowsPerTxn > 1 {
		return chunks(ctx, total, shape.RowsPerTxn, conns, func(ctx context.Context, from, to int) error {
			return execSQL(ctx, pool, bulkInsert, int64(from), int64(to), tag, int64(shape.Keys))
		})
	}
	return chunks(ctx, total, 1000, conns, func(ctx context.Context, from, to int) error {
		return execSQL(ctx, pool, fmt.Sprintf(singleTxnBlock, from, to, tag, tag, tag))
	})
}

func execSQL(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) error {
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("write backlog: %w", err)
	}
	return nil
}

// steadyTxn returns the writer of transaction i of a steady-state rate: an
// order with its event, or RowsPerTxn outbox rows.
func steadyTxn(pool *pgxpool.Pool, r Rate, tag string) func(ctx context.Context, i int64) error {
	if r.RowsPerTxn == 1 {
		return func(ctx context.Context, i int64) error {
			_, err := pool.Exec(ctx, singleTxn, fmt.Sprintf("o-%s-%d", tag, i), fmt.Sprintf("c%d", i%97), i%10000+1)
			return err
		}
	}
	n := int64(r.RowsPerTxn)
	return func(ctx context.Context, i int64) error {
		_, err := pool.Exec(ctx, bulkInsert, i*n+1, (i+1)*n, tag, int64(0))
		return err
	}
}

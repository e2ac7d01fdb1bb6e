package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The outbox event every new order writes.
const (
	aggregateType    = "orders"
	eventTypeCreated = "order.created"
	statusCreated    = "created"
)

var (
	errDuplicateOrder = errors.New("order already exists")
	errKeyReused      = errors.New("idempotency key reused with a different request")
	errNotFound       = errors.New("order not found")
	errKeyVanished    = errors.New("idempotency key vanished while reading it")
)

// Order is an orders row as GET /orders/{id} shows it. Customer, amount and
// currency may be null for rows other clients wrote.
type Order struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	Customer  *string   `json:"customer"`
	Amount    *int64    `json:"amount"`
	Currency  *string   `json:"currency"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// created is the answer to a successful POST /orders, stored for replays.
type created struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	EventID string `json:"event_id"`
}

// answer is what a POST returned: fresh, or replayed from an earlier request
// with the same Idempotency-Key.
type answer struct {
	status   int
	body     created
	replayed bool
}

// newOrder is everything create writes. key is nil without Idempotency-Key.
type newOrder struct {
	req     orderRequest // ID filled in
	eventID uuid.UUID
	headers map[string]string // outbox headers column
	key     *idempotencyKey
}

// store is what the handlers need from the database.
type store interface {
	create(ctx context.Context, o newOrder) (answer, error)
	order(ctx context.Context, id string) (Order, error)
	ready(ctx context.Context) error
	// prune removes Idempotency-Keys older than ttl.
	prune(ctx context.Context, ttl time.Duration) (int64, error)
}

// rowWriter writes the order and its event inside create's transaction. It is
// an interface only so that a test can fail or stall between the two inserts.
type rowWriter interface {
	insertOrder(ctx context.Context, tx pgx.Tx, r orderRequest) (time.Time, error)
	insertEvent(ctx context.Context, tx pgx.Tx, eventID uuid.UUID, r orderRequest, payload, headers []byte) error
}

// pgStore is the store on PostgreSQL.
type pgStore struct {
	pool *pgxpool.Pool
	w    rowWriter
	ttl  time.Duration // of Idempotency-Keys: older ones are claimed anew
}

func newPGStore(pool *pgxpool.Pool) *pgStore {
	return &pgStore{pool: pool, w: sqlWriter{}, ttl: DefaultConfig().IdempotencyTTL}
}

// create writes the idempotency claim (when keyed), the order, its outbox
// event and the stored answer in one transaction. A second request with the
// same key blocks on the key's primary key until the first commits (then
// replays its answer) or rolls back (then proceeds itself).
func (s *pgStore) create(ctx context.Context, o newOrder) (answer, error) {
	for attempt := 1; ; attempt++ {
		a, err := s.createOnce(ctx, o)
		// A key row deleted between our conflict and our read (pruning) is
		// free again: try once more.
		if !errors.Is(err, errKeyVanished) || attempt == 3 {
			return a, err
		}
	}
}

func (s *pgStore) createOnce(ctx context.Context, o newOrder) (answer, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return answer{}, fmt.Errorf("begin transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit

	if o.key != nil {
		prev, claimed, err := claimKey(ctx, tx, *o.key, s.ttl)
		if err != nil || !claimed {
			return prev, err
		}
	}
	a, err := s.write(ctx, tx, o)
	if err != nil {
		return answer{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return answer{}, fmt.Errorf("commit order: %w", err)
	}
	return a, nil
}

// write inserts the order and its event and records the answer under the key.
func (s *pgStore) write(ctx context.Context, tx pgx.Tx, o newOrder) (answer, error) {
	createdAt, err := s.w.insertOrder(ctx, tx, o.req)
	if err != nil {
		return answer{}, err
	}
	payload, err := eventPayload(o.req, createdAt)
	if err != nil {
		return answer{}, err
	}
	headers, err := json.Marshal(o.headers)
	if err != nil {
		return answer{}, fmt.Errorf("encode event headers: %w", err)
	}
	if err := s.w.insertEvent(ctx, tx, o.eventID, o.req, payload, headers); err != nil {
		return answer{}, err
	}
	a := answer{status: 201, body: created{ID: o.req.ID, Status: statusCreated, EventID: o.eventID.String()}}
	if o.key != nil {
		if err := storeAnswer(ctx, tx, o.key.key, a); err != nil {
			return answer{}, err
		}
	}
	return a, nil
}

// eventPayload is the order.created payload: the order as created.
func eventPayload(r orderRequest, createdAt time.Time) ([]byte, error) {
	b, err := json.Marshal(struct {
		orderRequest
		Status    string    `json:"status"`
		CreatedAt time.Time `json:"created_at"`
	}{r, statusCreated, createdAt.UTC()})
	if err != nil {
		return nil, fmt.Errorf("encode event payload: %w", err)
	}
	return b, nil
}

func (s *pgStore) order(ctx context.Context, id string) (Order, error) {
	var o Order
	err := s.pool.QueryRow(ctx,
		`SELECT id, status, customer, amount, currency, created_at, updated_at FROM orders WHERE id = $1`, id).
		Scan(&o.ID, &o.Status, &o.Customer, &o.Amount, &o.Currency, &o.CreatedAt, &o.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, errNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("read order: %w", err)
	}
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	return o, nil
}

// ready checks that the database answers and holds the schema. Its errors
// are fixed texts: driver errors may name hosts and users, never shown here.
func (s *pgStore) ready(ctx context.Context) error {
	var migrated bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass('orders') IS NOT NULL
		AND to_regclass('outbox') IS NOT NULL AND to_regclass('api_idempotency') IS NOT NULL`).Scan(&migrated)
	if err != nil {
		return errors.New("database unreachable")
	}
	if !migrated {
		return errors.New("schema missing: run eventforge migrate --demo (the API needs the demo's orders tables)")
	}
	return nil
}

// sqlWriter is the production rowWriter.
type sqlWriter struct{}

func (sqlWriter) insertOrder(ctx context.Context, tx pgx.Tx, r orderRequest) (time.Time, error) {
	var createdAt time.Time
	err := tx.QueryRow(ctx,
		`INSERT INTO orders (id, status, customer, amount, currency) VALUES ($1, $2, $3, $4, $5) RETURNING created_at`,
		r.ID, statusCreated, r.Customer, r.Amount, r.Currency).Scan(&createdAt)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == pgerrcode.UniqueViolation {
		return time.Time{}, errDuplicateOrder
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("insert order: %w", err)
	}
	return createdAt, nil
}

func (sqlWriter) insertEvent(ctx context.Context, tx pgx.Tx, eventID uuid.UUID, r orderRequest, payload, headers []byte) error {
	_, err := tx.Exec(ctx,
		`INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
		 VALUES ($1, $2, $3, $4, $5, $6)`,
		eventID, aggregateType, r.ID, eventTypeCreated, json.RawMessage(payload), json.RawMessage(headers))
	if err != nil {
		return fmt.Errorf("insert outbox event: %w", err)
	}
	return nil
}

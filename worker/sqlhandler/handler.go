package sqlhandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventforge/eventforge/worker"
)

// paramOIDs declares the five parameters, so a statement may use any subset
// of them and PostgreSQL still knows every type.
var paramOIDs = []uint32{pgtype.TextOID, pgtype.JSONBOID, pgtype.UUIDOID, pgtype.TextOID, pgtype.JSONBOID}

// ErrTooFewRows is the failure of a statement that affected fewer rows than
// its expect_rows.
var ErrTooFewRows = errors.New("statement affected too few rows")

// ErrNoHandler is the failure of an event type without a handler under
// "unknown: dlq".
var ErrNoHandler = errors.New("no handler for event type")

// Preparer describes a statement without running it; *pgconn.PgConn is one.
type Preparer interface {
	Prepare(ctx context.Context, name, sql string, paramOIDs []uint32) (*pgconn.StatementDescription, error)
}

// Handler is a worker.Handler running the SQL of a Spec. Its statements
// are prepared once per connection, on first use.
type Handler struct {
	unknown string
	types   map[string]*compiled
}

// compiled is the checked statement of one event type.
type compiled struct {
	typ       string
	st        Statement
	name      string // of the prepared single statement
	batchName string // of the prepared batch statement; "" without batch_sql
}

// New checks every statement of spec against the database behind conn
// (parse, name resolution and types, through an unnamed prepared statement
// that runs nothing) and returns the handler. Errors name the event type.
func New(ctx context.Context, conn Preparer, spec *Spec) (*Handler, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{unknown: spec.Unknown, types: make(map[string]*compiled, len(spec.Handlers))}
	if h.unknown == "" {
		h.unknown = UnknownSkip
	}
	var errs []error
	for _, typ := range spec.EventTypes() {
		st := spec.Handlers[typ]
		c := &compiled{typ: typ, st: st, name: statementName("s", st.SQL)}
		if err := check(ctx, conn, st.SQL, paramOIDs); err != nil {
			errs = append(errs, fmt.Errorf("handler %q: invalid SQL: %w", typ, err))
		}
		if st.BatchSQL != "" {
			c.batchName = statementName("b", st.BatchSQL)
			if err := checkBatch(ctx, conn, st); err != nil {
				errs = append(errs, fmt.Errorf("handler %q: invalid batch_sql: %w", typ, err))
			}
		}
		h.types[typ] = c
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// check prepares sql unnamed, which runs nothing.
func check(ctx context.Context, conn Preparer, sql string, oids []uint32) error {
	_, err := describe(ctx, conn, sql, oids)
	return err
}

func describe(ctx context.Context, conn Preparer, sql string, oids []uint32) (*pgconn.StatementDescription, error) {
	sd, err := conn.Prepare(ctx, "", sql, oids)
	if err != nil {
		return nil, withHint(err)
	}
	if len(sd.ParamOIDs) > len(oids) {
		// PostgreSQL infers the type of a parameter past $5 itself.
		return nil, fmt.Errorf("uses $%d, but only $1 to $%d exist", len(sd.ParamOIDs), len(oids))
	}
	return sd, nil
}

// ErrBatchNotAttributable is the failure at start-up of a batch_sql that
// returns no rows while its type expects rows: expect_rows holds per event,
// so the statement must say which aggregate each changed row belongs to.
var ErrBatchNotAttributable = errors.New("batch_sql must return the aggregate id ($1 element) of each row it changes, e.g. RETURNING e.id, so that expect_rows holds for each event (or set expect_rows: 0, or drop batch_sql)")

// checkBatch prepares st's batch statement and, when st expects rows,
// requires the statement to return them.
func checkBatch(ctx context.Context, conn Preparer, st Statement) error {
	sd, err := describe(ctx, conn, st.BatchSQL, batchOIDs)
	if err != nil {
		return err
	}
	if st.MinRows() > 0 && len(sd.Fields) == 0 {
		return ErrBatchNotAttributable
	}
	return nil
}

// withHint adds the remedy to a missing schema object.
func withHint(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.InvalidSchemaName,
			pgerrcode.UndefinedFunction, pgerrcode.UndefinedObject:
			return fmt.Errorf("%w (is this the right database, and migrated? run eventforge migrate)", err)
		}
	}
	return err
}

// Apply runs the statement of ev's type in tx and checks the rows it
// affected.
func (h *Handler) Apply(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
	c, err := h.lookup(ev.EventType)
	if err != nil {
		return err
	}
	args, err := params(&ev)
	if err != nil {
		return err
	}
	conn := tx.Conn().PgConn()
	if err := prepare(ctx, conn, c.name, c.st.SQL, paramOIDs); err != nil {
		return err
	}
	tag, err := conn.ExecPrepared(ctx, c.name, args, nil, nil).Close()
	if err != nil {
		forgetPrepared(conn, err)
		return fmt.Errorf("run statement: %w", err)
	}
	return checkRows(ev, c.st, tag)
}

// ApplyBatch implements worker.BatchHandler: it sends the statements of
// all events in one pipeline (one round trip) and checks each one's rows.
// Runs of events of a type with batch_sql go in one set-based statement.
func (h *Handler) ApplyBatch(ctx context.Context, tx pgx.Tx, evs []worker.Event) ([]bool, error) {
	skipped := make([]bool, len(evs))
	calls, err := h.plan(evs, skipped)
	if err != nil || len(calls) == 0 {
		return skipped, err
	}
	conn := tx.Conn().PgConn()
	batch := &pgconn.Batch{}
	for _, k := range calls {
		if err := h.prepareCall(ctx, conn, k); err != nil {
			return nil, err
		}
		if err := k.queue(batch, evs); err != nil {
			return nil, fmt.Errorf("%s: %w", k.describe(evs), err)
		}
	}
	results, err := conn.ExecBatch(ctx, batch).ReadAll()
	for n, r := range results {
		if r.Err != nil {
			forgetPrepared(conn, r.Err)
			return nil, fmt.Errorf("%s: run statement: %w", calls[n].describe(evs), r.Err)
		}
		if err := calls[n].check(evs, r); err != nil {
			return nil, fmt.Errorf("%s: %w", calls[n].describe(evs), err)
		}
	}
	if err != nil {
		forgetPrepared(conn, err)
		return nil, fmt.Errorf("run statements: %w", err)
	}
	return skipped, nil
}

func (h *Handler) prepareCall(ctx context.Context, conn *pgconn.PgConn, k call) error {
	if k.set() {
		return prepare(ctx, conn, k.c.batchName, k.c.st.BatchSQL, batchOIDs)
	}
	return prepare(ctx, conn, k.c.name, k.c.st.SQL, paramOIDs)
}

// lookup returns the statement of an event type; ErrSkip for an unknown
// type under "unknown: skip".
func (h *Handler) lookup(typ string) (*compiled, error) {
	c, ok := h.types[typ]
	switch {
	case ok:
		return c, nil
	case h.unknown == UnknownDLQ:
		return nil, worker.Permanent(fmt.Errorf("%w %q", ErrNoHandler, typ))
	default:
		return nil, worker.ErrSkip
	}
}

// params are ev's five parameters in text format: PostgreSQL parses each
// by its declared type, the payload as the JSON text the record carried.
func params(ev *worker.Event) ([][]byte, error) {
	headers, err := headersJSON(ev)
	if err != nil {
		return nil, err
	}
	return [][]byte{[]byte(ev.AggregateID), ev.Payload, []byte(ev.ID.String()), []byte(ev.EventType), headers}, nil
}

// headersJSON is the $5 parameter: the event's string headers as a JSON
// object.
func headersJSON(ev *worker.Event) ([]byte, error) {
	if len(ev.Headers) == 0 {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(ev.Headers)
	if err != nil {
		return nil, worker.Permanent(fmt.Errorf("encode headers: %w", err))
	}
	return b, nil
}

func checkRows(ev worker.Event, st Statement, tag pgconn.CommandTag) error {
	return checkCount(ev, st, tag.RowsAffected())
}

// checkCount fails when n, the rows changed for ev, is below expect_rows.
func checkCount(ev worker.Event, st Statement, n int64) error {
	if n < int64(st.MinRows()) {
		return fmt.Errorf("%w: %d rows for %s of aggregate %q, expected at least %d", ErrTooFewRows, n, ev.EventType, ev.AggregateID, st.MinRows())
	}
	return nil
}

package sqlhandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// Handler is a worker.Handler running the SQL of a Spec.
type Handler struct {
	spec Spec
}

// New checks every statement of spec against the database behind conn
// (parse, name resolution and types, through an unnamed prepared statement
// that runs nothing) and returns the handler. Errors name the event type.
func New(ctx context.Context, conn Preparer, spec *Spec) (*Handler, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	for _, typ := range spec.EventTypes() {
		sd, err := conn.Prepare(ctx, "", spec.Handlers[typ].SQL, paramOIDs)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("handler %q: invalid SQL: %w", typ, err))
		case len(sd.ParamOIDs) > len(paramOIDs):
			// PostgreSQL infers the type of a parameter past $5 itself.
			errs = append(errs, fmt.Errorf("handler %q: invalid SQL: uses $%d, but only $1 to $%d exist", typ, len(sd.ParamOIDs), len(paramOIDs)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := *spec
	if s.Unknown == "" {
		s.Unknown = UnknownSkip
	}
	return &Handler{spec: s}, nil
}

// Apply runs the statement of ev's type in tx and checks the rows it
// affected.
func (h *Handler) Apply(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
	st, args, err := h.statement(ev)
	if st == nil || err != nil {
		return err
	}
	tag, err := tx.Conn().PgConn().ExecParams(ctx, st.SQL, args, paramOIDs, nil, nil).Close()
	if err != nil {
		return fmt.Errorf("run statement: %w", err)
	}
	return checkRows(ev, *st, tag)
}

// ApplyBatch implements worker.BatchHandler: it sends the statements of
// all events in one pipeline (one round trip) and checks each one's rows.
func (h *Handler) ApplyBatch(ctx context.Context, tx pgx.Tx, evs []worker.Event) ([]bool, error) {
	skipped := make([]bool, len(evs))
	stmts := make([]*Statement, len(evs))
	batch := &pgconn.Batch{}
	queued := 0
	for i, ev := range evs {
		st, args, err := h.statement(ev)
		if errors.Is(err, worker.ErrSkip) {
			skipped[i] = true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		stmts[i] = st
		batch.ExecParams(st.SQL, args, paramOIDs, nil, nil)
		queued++
	}
	if queued == 0 {
		return skipped, nil
	}
	results, err := tx.Conn().PgConn().ExecBatch(ctx, batch).ReadAll()
	k := 0
	for i, st := range stmts {
		if st == nil {
			continue
		}
		if k >= len(results) {
			break
		}
		r := results[k]
		k++
		if r.Err != nil {
			return nil, fmt.Errorf("event %s: run statement: %w", evs[i].ID, r.Err)
		}
		if err := checkRows(evs[i], *st, r.CommandTag); err != nil {
			return nil, fmt.Errorf("event %s: %w", evs[i].ID, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("run statements: %w", err)
	}
	return skipped, nil
}

// statement returns the statement for ev and its arguments; a nil
// statement with ErrSkip for an unknown type under "unknown: skip".
func (h *Handler) statement(ev worker.Event) (*Statement, [][]byte, error) {
	st, ok := h.spec.Handlers[ev.EventType]
	if !ok {
		if h.spec.Unknown == UnknownDLQ {
			return nil, nil, worker.Permanent(fmt.Errorf("%w %q", ErrNoHandler, ev.EventType))
		}
		return nil, nil, worker.ErrSkip
	}
	headers := []byte("{}")
	if len(ev.Headers) > 0 {
		var err error
		if headers, err = json.Marshal(ev.Headers); err != nil {
			return nil, nil, worker.Permanent(fmt.Errorf("encode headers: %w", err))
		}
	}
	// Text format for every parameter: PostgreSQL parses each by its
	// declared type, the payload as the JSON text the record carried.
	return &st, [][]byte{[]byte(ev.AggregateID), ev.Payload, []byte(ev.ID.String()), []byte(ev.EventType), headers}, nil
}

func checkRows(ev worker.Event, st Statement, tag pgconn.CommandTag) error {
	if n := tag.RowsAffected(); n < int64(st.MinRows()) {
		return fmt.Errorf("%w: %d rows for %s of aggregate %q, expected at least %d", ErrTooFewRows, n, ev.EventType, ev.AggregateID, st.MinRows())
	}
	return nil
}

package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventforge/eventforge/internal/shared/failpoint"
)

// DB begins transactions; *pgxpool.Pool and *pgx.Conn satisfy it.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Result is what applying an event did.
type Result int

// Results of applying an event.
const (
	Applied   Result = iota + 1 // the handler ran and its effects committed
	Duplicate                   // the inbox already held the event: nothing ran
	Skipped                     // recorded in the inbox without effect (ErrSkip)
)

func (r Result) String() string {
	switch r {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

const (
	insertInbox = `INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2::uuid) ON CONFLICT DO NOTHING`
	// insertInboxReplay is insertInbox for a record `dlq replay`
	// republished: a 'dlq' row (the event was dead-lettered) turns into an
	// 'applied' one, so the replay applies the event once; an 'applied' row
	// stays, so a second replay is a duplicate.
	insertInboxReplay = `INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2::uuid)
ON CONFLICT (consumer, event_id) DO UPDATE SET result = 'applied', processed_at = now()
WHERE processed_events.result = 'dlq'`
	// insertInboxAll inserts a batch's inbox rows in one statement; it
	// fails if any exists.
	insertInboxAll = `INSERT INTO processed_events (consumer, event_id) SELECT $1, id FROM unnest($2::uuid[]) AS t(id)`
	// insertInboxBatch inserts a batch's missing inbox rows in one
	// statement and returns their ids.
	insertInboxBatch = `INSERT INTO processed_events (consumer, event_id)
SELECT $1, id FROM unnest($2::uuid[]) AS t(id)
ON CONFLICT DO NOTHING RETURNING event_id`
	// insertInboxBatchReplay is insertInboxBatch for a batch holding
	// replayed records ($3, see insertInboxReplay). Its ids must be
	// distinct: DO UPDATE cannot touch a row twice in one statement.
	insertInboxBatchReplay = `INSERT INTO processed_events (consumer, event_id)
SELECT $1, id FROM unnest($2::uuid[]) AS t(id)
ON CONFLICT (consumer, event_id) DO UPDATE SET result = 'applied', processed_at = now()
WHERE processed_events.result = 'dlq' AND processed_events.event_id = ANY($3::uuid[])
RETURNING event_id`
	// insertInboxDLQ records that an event was dead-lettered, so that a
	// copy of it delivered later is a duplicate and not dead-lettered again.
	insertInboxDLQ = `INSERT INTO processed_events (consumer, event_id, result) VALUES ($1, $2::uuid, 'dlq') ON CONFLICT DO NOTHING`
)

// inboxStatements are the statements the Runner runs on processed_events;
// CheckSchema prepares each.
var inboxStatements = []string{insertInbox, insertInboxReplay, insertInboxAll, insertInboxBatch, insertInboxBatchReplay, insertInboxDLQ}

// ApplyOnce applies ev for consumer exactly once in effect (docs/design.md#inbox):
// in one transaction it inserts the event's processed_events row, and only
// if that row is new runs h; then it commits. A concurrent delivery of the
// same event waits on the first one's row and then finds it: at most one
// transaction ever runs h to commit. On error nothing is committed. An
// event the Runner dead-lettered has a row too (result 'dlq'), so it is a
// duplicate, unless ev.Replayed: then that row turns 'applied' and h runs.
func ApplyOnce(ctx context.Context, db DB, consumer string, h Handler, ev Event) (Result, error) {
	tx, fresh, err := beginInbox(ctx, db, consumer, ev)
	if err != nil {
		return 0, err
	}
	defer rollback(ctx, tx)
	if !fresh {
		return Duplicate, nil // the deferred rollback ends the empty transaction
	}
	res, err := run(ctx, tx, h, ev)
	if err != nil {
		return 0, err
	}
	failpoint.Hit(failpoint.WorkerInsideTxBeforeCommit)
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// beginInbox begins a transaction and inserts ev's inbox row in it; fresh
// reports a row that is new (or a replayed event's 'dlq' row turned
// 'applied'). On error the transaction is rolled back already; else the
// caller ends it.
func beginInbox(ctx context.Context, db DB, consumer string, ev Event) (tx pgx.Tx, fresh bool, err error) {
	tx, err = db.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", errBegin, err)
	}
	insert := insertInbox
	if ev.Replayed {
		insert = insertInboxReplay
	}
	tag, err := tx.Exec(ctx, insert, consumer, ev.ID.String())
	if err != nil {
		rollback(ctx, tx)
		return nil, false, fmt.Errorf("insert inbox row: %w", err)
	}
	return tx, tag.RowsAffected() > 0, nil
}

// applyBatch applies evs (in order, usually of one partition) in a single
// transaction: one statement inserts every inbox row, then h runs for each
// event whose row is new, the first occurrence of an id winning. Any error
// rolls the whole batch back.
//
// The inbox rows are first inserted with a plain INSERT, cheaper for
// PostgreSQL than ON CONFLICT; only when one of them exists already (a
// redelivery) or repeats is the batch redone with ON CONFLICT DO NOTHING,
// which tells the new from the known.
func applyBatch(ctx context.Context, db DB, consumer string, h Handler, evs []Event) ([]Result, error) {
	// pgtype.UUID encodes without reflection; uuid.UUID would go through
	// driver.Valuer and text.
	ids := make([]pgtype.UUID, len(evs))
	for i := range evs {
		ids[i] = pgtype.UUID{Bytes: evs[i].ID, Valid: true}
	}
	results, err := applyBatchTx(ctx, db, consumer, h, evs, ids, insertAllInbox)
	if errors.Is(err, errInboxConflict) {
		results, err = applyBatchTx(ctx, db, consumer, h, evs, ids, newInboxInserter(evs))
	}
	return results, err
}

// errInboxConflict reports that a plain insert of inbox rows met a row that
// exists.
var errInboxConflict = errors.New("inbox row exists")

// inboxInserter inserts a batch's inbox rows and returns the set of ids
// that were new.
type inboxInserter func(ctx context.Context, tx pgx.Tx, consumer string, ids []pgtype.UUID) (map[uuid.UUID]struct{}, error)

func applyBatchTx(ctx context.Context, db DB, consumer string, h Handler, evs []Event, ids []pgtype.UUID, insert inboxInserter) ([]Result, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBegin, err)
	}
	defer rollback(ctx, tx)
	fresh, err := insert(ctx, tx, consumer, ids)
	if err != nil {
		return nil, err
	}
	results := make([]Result, len(evs))
	todo := make([]int, 0, len(fresh)) // indexes of the events new to the inbox
	for i := range evs {
		id := evs[i].ID
		if _, ok := fresh[id]; !ok {
			results[i] = Duplicate
			continue
		}
		delete(fresh, id) // a later copy in this batch is a duplicate
		todo = append(todo, i)
	}
	if err := runAll(ctx, tx, h, evs, todo, results); err != nil {
		return nil, err
	}
	failpoint.Hit(failpoint.WorkerInsideTxBeforeCommit)
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return results, nil
}

// insertAllInbox inserts every inbox row of ids, all of them new, or fails
// with errInboxConflict.
func insertAllInbox(ctx context.Context, tx pgx.Tx, consumer string, ids []pgtype.UUID) (map[uuid.UUID]struct{}, error) {
	if _, err := tx.Exec(ctx, insertInboxAll, consumer, ids); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation { // unique_violation: a row exists or repeats
			return nil, fmt.Errorf("%w: %w", errInboxConflict, err)
		}
		return nil, fmt.Errorf("insert inbox rows: %w", err)
	}
	fresh := make(map[uuid.UUID]struct{}, len(ids))
	for _, id := range ids {
		fresh[id.Bytes] = struct{}{}
	}
	return fresh, nil
}

// newInboxInserter returns an inserter of the inbox rows of ids that are
// missing, which also turns the 'dlq' rows of the replayed events of evs
// into 'applied' ones.
func newInboxInserter(evs []Event) inboxInserter {
	var replayed []pgtype.UUID
	for i := range evs {
		if evs[i].Replayed {
			replayed = append(replayed, pgtype.UUID{Bytes: evs[i].ID, Valid: true})
		}
	}
	return func(ctx context.Context, tx pgx.Tx, consumer string, ids []pgtype.UUID) (map[uuid.UUID]struct{}, error) {
		sql, args := insertInboxBatch, []any{consumer, ids}
		if len(replayed) > 0 {
			sql, args = insertInboxBatchReplay, []any{consumer, distinct(ids), replayed}
		}
		return insertNewInbox(ctx, tx, sql, args)
	}
}

// distinct returns ids without repeats, in order.
func distinct(ids []pgtype.UUID) []pgtype.UUID {
	seen := make(map[[16]byte]bool, len(ids))
	out := make([]pgtype.UUID, 0, len(ids))
	for _, id := range ids {
		if !seen[id.Bytes] {
			seen[id.Bytes] = true
			out = append(out, id)
		}
	}
	return out
}

// insertNewInbox runs sql, an insert of inbox rows returning the ids it
// inserted (or turned from 'dlq' to 'applied').
func insertNewInbox(ctx context.Context, tx pgx.Tx, sql string, args []any) (map[uuid.UUID]struct{}, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("insert inbox rows: %w", err)
	}
	defer rows.Close()
	fresh := map[uuid.UUID]struct{}{}
	var id [16]byte
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read inbox rows: %w", err)
		}
		fresh[id] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert inbox rows: %w", err)
	}
	return fresh, nil
}

// recordDeadLetter inserts the 'dlq' inbox row of the event id, after its
// dead letter was acked.
func recordDeadLetter(ctx context.Context, db DB, consumer string, id uuid.UUID) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errBegin, err)
	}
	defer rollback(ctx, tx)
	if _, err := tx.Exec(ctx, insertInboxDLQ, consumer, id.String()); err != nil {
		return fmt.Errorf("record dead letter in the inbox: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// runAll applies evs[i] for each i of todo, in order, and fills results.
func runAll(ctx context.Context, tx pgx.Tx, h Handler, evs []Event, todo []int, results []Result) error {
	if bh, ok := h.(BatchHandler); ok && len(todo) > 1 {
		run := make([]Event, len(todo))
		for k, i := range todo {
			run[k] = evs[i]
		}
		skipped, err := bh.ApplyBatch(ctx, tx, run)
		if err != nil {
			return fmt.Errorf("handle batch of %d events: %w", len(run), err)
		}
		if len(skipped) != len(run) {
			return fmt.Errorf("handle batch: %d results for %d events", len(skipped), len(run))
		}
		for k, i := range todo {
			results[i] = Applied
			if skipped[k] {
				results[i] = Skipped
			}
		}
		return nil
	}
	for _, i := range todo {
		var err error
		if results[i], err = run(ctx, tx, h, evs[i]); err != nil {
			return fmt.Errorf("event %s at offset %d: %w", evs[i].ID, evs[i].Offset, err)
		}
	}
	return nil
}

// run calls the handler and maps ErrSkip to Skipped.
func run(ctx context.Context, tx pgx.Tx, h Handler, ev Event) (Result, error) {
	err := h.Apply(ctx, tx, ev)
	switch {
	case err == nil:
		return Applied, nil
	case errors.Is(err, ErrSkip):
		return Skipped, nil
	default:
		return 0, fmt.Errorf("handle %s event %s: %w", ev.EventType, ev.ID, err)
	}
}

// rollback ends tx if it is still open; after Commit it does nothing. It
// runs even when ctx has ended, so the connection goes back clean.
func rollback(ctx context.Context, tx pgx.Tx) {
	_ = tx.Rollback(context.WithoutCancel(ctx))
}

package sqlhandler

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventforge/eventforge/worker"
)

// batchOIDs declares the five parameters of a batch_sql statement: the
// single statement's parameters as arrays, one element per event.
var batchOIDs = []uint32{pgtype.TextArrayOID, pgtype.JSONBArrayOID, pgtype.UUIDArrayOID, pgtype.TextArrayOID, pgtype.JSONBArrayOID}

// call is one statement of a pipelined batch: the single statement for one
// event, or the batch statement for a segment of events of one type.
type call struct {
	c   *compiled
	idx []int // indexes into the batch's events, in offset order
}

// set reports whether the call runs the type's batch statement.
func (k call) set() bool { return len(k.idx) > 1 }

// plan maps evs to the calls that apply them, in order, and marks the
// events skipped for want of a handler. Consecutive events of a type with
// batch_sql share one call while their aggregates are distinct: a
// set-based statement sees each aggregate at most once, so the order of one
// aggregate's events is the order of the calls.
func (h *Handler) plan(evs []worker.Event, skipped []bool) ([]call, error) {
	var calls []call
	open := -1 // the call that the next event may join
	var keys map[string]bool
	for i := range evs {
		ev := &evs[i]
		c, err := h.lookup(ev.EventType)
		switch {
		case err == worker.ErrSkip:
			skipped[i] = true
			continue
		case err != nil:
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		if open >= 0 && calls[open].c == c && !keys[ev.AggregateID] {
			calls[open].idx = append(calls[open].idx, i)
			keys[ev.AggregateID] = true
			continue
		}
		calls = append(calls, call{c: c, idx: []int{i}})
		open = -1
		if c.batchName != "" {
			open = len(calls) - 1
			keys = map[string]bool{ev.AggregateID: true}
		}
	}
	return calls, nil
}

// queue adds the call's statement to b.
func (k call) queue(b *pgconn.Batch, evs []worker.Event) error {
	if !k.set() {
		args, err := params(&evs[k.idx[0]])
		if err != nil {
			return err
		}
		b.ExecPrepared(k.c.name, args, nil, nil)
		return nil
	}
	args, err := arrayParams(evs, k.idx)
	if err != nil {
		return err
	}
	b.ExecPrepared(k.c.batchName, args, nil, nil)
	return nil
}

// check compares the rows the call affected with what its events expect.
// A set-based statement returns the aggregate id of each row it changed
// (its first column), so each event is checked alone, as its single
// statement would be: a batch where one event changed 2 rows and another 0
// fails. When it falls short the worker redoes the events one by one.
func (k call) check(evs []worker.Event, r *pgconn.Result) error {
	if !k.set() {
		return checkRows(evs[k.idx[0]], k.c.st, r.CommandTag)
	}
	want := k.c.st.MinRows()
	if want == 0 {
		return nil
	}
	rows := make(map[string]int64, len(k.idx))
	for _, i := range k.idx {
		rows[evs[i].AggregateID] = 0
	}
	for _, row := range r.Rows {
		if len(row) == 0 || row[0] == nil {
			return fmt.Errorf("%w: a row without an aggregate id", ErrBatchNotAttributable)
		}
		n, ok := rows[string(row[0])]
		if !ok {
			return fmt.Errorf("%w: %q is not the aggregate id of one of its events", ErrBatchNotAttributable, row[0])
		}
		rows[string(row[0])] = n + 1
	}
	for _, i := range k.idx {
		if err := checkCount(evs[i], k.c.st, rows[evs[i].AggregateID]); err != nil {
			return err
		}
	}
	return nil
}

// describe names the call's events in errors.
func (k call) describe(evs []worker.Event) string {
	if !k.set() {
		return "event " + evs[k.idx[0]].ID.String()
	}
	return fmt.Sprintf("%d %s events from %s", len(k.idx), k.c.typ, evs[k.idx[0]].ID)
}

// arrayParams encodes the parameters of the events at idx as the text form
// of five PostgreSQL arrays.
func arrayParams(evs []worker.Event, idx []int) ([][]byte, error) {
	var size int
	for _, i := range idx {
		size += len(evs[i].AggregateID) + len(evs[i].Payload) + len(evs[i].EventType) + 48
	}
	arrays := [5][]byte{
		make([]byte, 0, size), make([]byte, 0, size), make([]byte, 0, 40*len(idx)),
		make([]byte, 0, size), make([]byte, 0, 8*len(idx)),
	}
	for n, i := range idx {
		ev := &evs[i]
		headers, err := headersJSON(ev)
		if err != nil {
			return nil, err
		}
		for a, v := range [5][]byte{[]byte(ev.AggregateID), ev.Payload, []byte(ev.ID.String()), []byte(ev.EventType), headers} {
			if n == 0 {
				arrays[a] = append(arrays[a], '{')
			} else {
				arrays[a] = append(arrays[a], ',')
			}
			arrays[a] = appendElement(arrays[a], v)
		}
	}
	out := make([][]byte, len(arrays))
	for a := range arrays {
		out[a] = append(arrays[a], '}')
	}
	return out, nil
}

// appendElement appends v as a quoted element of an array literal: inside
// double quotes only a double quote and a backslash need a backslash.
func appendElement(dst, v []byte) []byte {
	dst = append(dst, '"')
	for _, c := range v {
		if c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}

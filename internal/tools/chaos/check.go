package chaos

import "github.com/google/uuid"

// Outcome is what the load generator knows about a write's commit.
type Outcome int

// Commit outcomes (docs/design.md#labelled-writes). Unknown ones are resolved against the
// database before the check.
const (
	Unknown Outcome = iota
	Committed
	RolledBack
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case RolledBack:
		return "rolled back"
	}
	return "unknown"
}

// Write is one event the load generator tried to write, in its key's commit
// order (every key belongs to one sequential writer).
type Write struct {
	ID      uuid.UUID
	Key     string
	Outcome Outcome
}

// Record is one record read back from the topic, in partition order.
type Record struct {
	ID        uuid.UUID
	Key       string
	Partition int32
	Offset    int64
}

// Result is the verdict of a run. The violation counts must all be zero.
type Result struct {
	Committed       int `json:"committed"`
	RolledBack      int `json:"rolled_back"`
	UnknownResolved int `json:"unknown_resolved"` // unknown at write time, found committed
	Records         int `json:"records"`

	Lost            int `json:"lost"`             // committed, never in Kafka
	Phantom         int `json:"phantom"`          // rolled back, yet in Kafka
	OrderViolations int `json:"order_violations"` // keys whose first occurrences are out of commit order
	DoubleApplied   int `json:"double_applied"`   // committed events applied more than once
	Unapplied       int `json:"unapplied"`        // committed events never applied
	Duplicates      int `json:"duplicates"`       // records repeating an event id (allowed, except in exactly-once mode)
	// ExactlyOnce: the relays ran with --exactly-once and the topic was read
	// with read_committed, so a duplicate is a violation.
	ExactlyOnce bool `json:"exactly_once"`

	Examples []string `json:"examples,omitempty"` // a few violating event ids or keys
}

// Violations is the number of broken guarantees.
func (r Result) Violations() int {
	n := r.Lost + r.Phantom + r.OrderViolations + r.DoubleApplied + r.Unapplied
	if r.ExactlyOnce {
		n += r.Duplicates
	}
	return n
}

const maxExamples = 10

func (r *Result) example(kind, what string) {
	n := 0
	for _, e := range r.Examples {
		if len(e) > len(kind) && e[:len(kind)] == kind {
			n++
		}
	}
	if n < 3 && len(r.Examples) < maxExamples {
		r.Examples = append(r.Examples, kind+": "+what)
	}
}

// Check compares what was written (writes, every outcome resolved: an
// Unknown left is treated as rolled back, the safe side for "phantom" and
// the strict side for nothing else) with what the topic holds (records, in
// partition and offset order) and how often each event took effect
// (applied).
func Check(writes []Write, records []Record, applied map[uuid.UUID]int) Result {
	var r Result
	r.Records = len(records)
	seen := make(map[uuid.UUID]int, len(records))
	firstOrder := map[string][]uuid.UUID{} // key -> event ids in order of first occurrence
	for _, rec := range records {
		seen[rec.ID]++
		if seen[rec.ID] == 1 {
			firstOrder[rec.Key] = append(firstOrder[rec.Key], rec.ID)
		} else {
			r.Duplicates++
		}
	}
	commitOrder := map[string][]uuid.UUID{}
	committed := map[uuid.UUID]bool{}
	for _, w := range writes {
		if w.Outcome != Committed {
			r.RolledBack++
			if seen[w.ID] > 0 {
				r.Phantom++
				r.example("phantom", w.ID.String())
			}
			continue
		}
		r.Committed++
		committed[w.ID] = true
		commitOrder[w.Key] = append(commitOrder[w.Key], w.ID)
		if seen[w.ID] == 0 {
			r.Lost++
			r.example("lost", w.ID.String())
		}
		switch n := applied[w.ID]; {
		case n == 0:
			r.Unapplied++
			r.example("unapplied", w.ID.String())
		case n > 1:
			r.DoubleApplied++
			r.example("double-applied", w.ID.String())
		}
	}
	for key, want := range commitOrder {
		if !inOrder(want, firstOrder[key], committed) {
			r.OrderViolations++
			r.example("order", key)
		}
	}
	return r
}

// inOrder reports whether the committed events of got (first occurrences)
// appear in the order of want. Missing events are counted as lost
// elsewhere; they do not make an order violation.
func inOrder(want, got []uuid.UUID, committed map[uuid.UUID]bool) bool {
	pos := make(map[uuid.UUID]int, len(want))
	for i, id := range want {
		pos[id] = i
	}
	last := -1
	for _, id := range got {
		if !committed[id] {
			continue
		}
		p, ok := pos[id]
		if !ok {
			continue
		}
		if p < last {
			return false
		}
		last = p
	}
	return true
}

// Package ack tracks which replicated transactions Kafka has fully
// acknowledged, so the relay confirms to PostgreSQL only what is durable
// (docs/design.md#confirm-by-end-lsn, #ordered-acks, #status-cadence, #bounded-memory).
//
// Transactions are recorded in commit order, each with its end LSN and a
// counter of events still in flight. The watermark is the end LSN of the
// longest prefix of committed transactions whose events are all acked: never
// "the highest acked LSN". The tracker also bounds the in-flight window, so a
// million-row transaction costs one entry and a counter, not a million.
//
// Imports (floor: shared library): no other EventForge package.
package ack

import (
	"sync"

	"github.com/jackc/pglogrepl"
)

// Tracker records transactions and acks. The relay's connection goroutine
// calls Begin, Add, Commit, Watermark and HasRoom; the producer's result
// goroutine calls Ack concurrently. All methods are safe for concurrent use.
//
// An event may be acked before its transaction's Commit (the producer acks
// while the transaction is still being read); the watermark never passes an
// open transaction, nor a committed one with events in flight.
//
// Misuse is a programming error and panics, like sync.WaitGroup: Begin while
// a transaction is open, Add or Commit with none open, acking the zero Token
// or more acks than events for a transaction. (A token acked twice while its
// transaction still has other events in flight cannot be told apart from
// those events' acks: the tracker keeps a counter, not a set.)
type Tracker struct {
	maxEvents int
	maxBytes  int64
	changed   chan struct{}

	mu sync.Mutex
	// ring holds the pending transactions with sequence numbers [head, tail)
	// at index seq&(len(ring)-1); len(ring) is a power of two. Invariant
	// after every method: the head entry (if any) is not complete.
	ring       []entry
	head, tail uint64
	open       bool // a transaction is open
	openEntry  bool // ...and has an entry (its first Add made it)
	watermark  pglogrepl.LSN
	events     int   // events in flight
	bytes      int64 // their bytes
}

// entry is one transaction that has had events.
type entry struct {
	end         pglogrepl.LSN // the commit's end LSN, also of later empty transactions merged in
	outstanding int           // events not yet acked
	committed   bool
}

// Token identifies an in-flight event: its transaction and its size. The
// zero Token is invalid.
type Token struct {
	seq  uint64
	size int64
}

const initialRing = 16

// New returns a Tracker whose window holds up to maxEvents events and
// maxBytes bytes in flight (see HasRoom). Both must be positive.
func New(maxEvents int, maxBytes int64) *Tracker {
	if maxEvents <= 0 || maxBytes <= 0 {
		panic("ack: New needs a positive window")
	}
	return &Tracker{
		maxEvents: maxEvents,
		maxBytes:  maxBytes,
		changed:   make(chan struct{}, 1),
		ring:      make([]entry, initialRing),
		head:      1, // sequence 0 is never used: the zero Token is invalid
		tail:      1,
	}
}

// Begin opens the next transaction in commit order. It panics if one is open.
func (t *Tracker) Begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open {
		panic("ack: Begin with a transaction open")
	}
	t.open, t.openEntry = true, false
}

// Add records one in-flight event of size bytes in the open transaction and
// returns the token to Ack it with. It panics if no transaction is open.
func (t *Tracker) Add(size int) Token {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open {
		panic("ack: Add without an open transaction")
	}
	if !t.openEntry {
		t.push()
		t.openEntry = true
	}
	seq := t.tail - 1
	t.at(seq).outstanding++
	sz := int64(max(size, 0))
	t.events++
	t.bytes += sz
	return Token{seq: seq, size: sz}
}

// Commit closes the open transaction with its end LSN (TransactionEndLSN).
// A transaction without events in flight is complete at once. It panics if
// no transaction is open.
func (t *Tracker) Commit(end pglogrepl.LSN) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open {
		panic("ack: Commit without an open transaction")
	}
	t.open = false
	switch {
	case t.openEntry:
		e := t.at(t.tail - 1)
		e.end, e.committed = end, true
		t.advance()
	case t.tail > t.head:
		// No events: it completes exactly when the transaction before it
		// does, so it merges into that (committed) entry and costs nothing.
		e := t.at(t.tail - 1)
		e.end = max(e.end, end)
	default:
		t.watermark = max(t.watermark, end)
	}
}

// Ack records that the broker acknowledged the event of tok. Events may be
// acked in any order, from any goroutine. It panics on a token that is not
// in flight (see Tracker on what can be detected).
func (t *Tracker) Ack(tok Token) {
	t.mu.Lock()
	if tok.seq < t.head || tok.seq >= t.tail || t.at(tok.seq).outstanding == 0 {
		t.mu.Unlock()
		panic("ack: Ack of a token that is not in flight")
	}
	t.at(tok.seq).outstanding--
	t.events--
	t.bytes -= tok.size
	if tok.seq == t.head {
		t.advance()
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Watermark returns the end LSN of the longest fully-acked prefix of
// committed transactions: what the relay may confirm as flushed. It never
// goes backwards and is 0 until a transaction completes. Completed entries
// are dropped as soon as they join the prefix.
func (t *Tracker) Watermark() pglogrepl.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watermark
}

// HasRoom reports whether another event may be read: fewer than maxEvents
// events and maxBytes bytes in flight, and fewer than maxEvents transactions
// pending (which bounds the bookkeeping when acks complete out of order). An
// empty window always has room, so one oversized event still passes.
func (t *Tracker) HasRoom() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.events == 0 {
		return true
	}
	return t.events < t.maxEvents && t.bytes < t.maxBytes && t.tail-t.head < uint64(t.maxEvents)
}

// Changed receives after acks (buffered, capacity 1; several acks may
// coalesce into one receive), so the connection goroutine can wait for room
// in a select together with its status-update ticker.
func (t *Tracker) Changed() <-chan struct{} { return t.changed }

// Idle reports whether no transaction is open and nothing is in flight: then
// everything received is confirmed by Watermark (docs/design.md#status-cadence).
func (t *Tracker) Idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.open && t.events == 0 && t.head == t.tail
}

// InFlight returns the number of events in flight and their bytes.
func (t *Tracker) InFlight() (events int, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events, t.bytes
}

// Pending returns the number of transactions with events that are not yet
// part of the acked prefix (the open one included once it has an event).
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.tail - t.head)
}

func (t *Tracker) at(seq uint64) *entry { return &t.ring[seq&uint64(len(t.ring)-1)] }

// push appends an empty entry, doubling the ring when full.
func (t *Tracker) push() {
	if t.tail-t.head == uint64(len(t.ring)) {
		bigger := make([]entry, 2*len(t.ring))
		for s := t.head; s < t.tail; s++ {
			bigger[s&uint64(len(bigger)-1)] = *t.at(s)
		}
		t.ring = bigger
	}
	*t.at(t.tail) = entry{}
	t.tail++
}

// advance drops the complete entries at the head into the watermark.
func (t *Tracker) advance() {
	for t.head < t.tail {
		e := t.at(t.head)
		if !e.committed || e.outstanding > 0 {
			return
		}
		t.watermark = max(t.watermark, e.end)
		*e = entry{}
		t.head++
	}
}

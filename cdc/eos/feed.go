// Package eos is the exactly-once relay's Kafka side of a session
// (docs/design.md#exactly-once): its Feeder cuts the stream's events into
// Kafka transactions for the produce engine, each closed by a record of the
// relay's position (cdc/position) on the compacted position topic, and
// acks without producing them the events a committed Kafka transaction
// already holds.
//
// The relay plugs in through two interfaces declared here: Items (what the
// feeder reads of the relay's events, the position record it wraps as one,
// and the ack of a skipped event) and Engine (the produce engine, running
// as the slot's transactional producer).
//
// Imports (floor: shared library): cdc/position, cdc/produce (its
// ErrFenced), sarama and pglogrepl; never the relay (cdc).
package eos

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/cdc/position"
	"github.com/eventforge/eventforge/cdc/produce"
)

// Event is what the feeder reads of one of the relay's events.
type Event struct {
	// Marker: the end of a PostgreSQL transaction, no record (Txn and
	// End set).
	Marker bool
	Txn    pglogrepl.LSN // the PostgreSQL transaction's final LSN (its BEGIN's)
	LSN    pglogrepl.LSN // the INSERT's WAL position
	End    pglogrepl.LSN // a marker's: the transaction's end LSN
	Size   int           // the record's encoded size
}

// Items is what the feeder needs of the relay's events (T).
type Items[T any] interface {
	// Of reads item.
	Of(item T) Event
	// Position wraps msg, the position record that ends a Kafka
	// transaction, as an item for the engine.
	Position(msg *sarama.ProducerMessage) T
	// Skip acks an event a committed Kafka transaction already holds.
	Skip(item T)
}

// Engine is what the feeder needs of the produce engine
// (produce.Engine), the slot's transactional producer.
type Engine[T any] interface {
	Run(ctx context.Context, in <-chan T, untilSettled bool) error
	Abort(ctx context.Context, wait time.Duration) error
}

// Config is one session's feeder.
type Config struct {
	Topic    string        // the position topic
	Slot     string        // the key of its records
	Interval time.Duration // --txn-interval
	MaxHeld  int           // events a Kafka transaction holds at most
	MaxBytes int64         // their bytes
	// Done is the position read back at the session's start: the events
	// it covers are skipped.
	Done position.Position
	Log  *slog.Logger
}

// Feeder cuts a session's events into Kafka transactions for the produce
// engine. The engine commits a transaction once each of its records is
// settled (appended, or refused for good and set aside) and acks its
// events only then.
//
// A Kafka transaction ends at a PostgreSQL transaction boundary when no
// more events are queued or once it is Interval old, or anywhere when the
// stream went quiet for Interval or when it holds MaxHeld events or
// MaxBytes (a large PostgreSQL transaction then spans several Kafka
// transactions; the position records the last INSERT included). Any error
// of the engine ends the session; the open transaction is aborted then,
// or, when that fails, by the next session's producer, which fences this
// one.
type Feeder[T any] struct {
	eng      Engine[T]
	items    Items[T]
	log      *slog.Logger
	topic    string
	slot     string
	interval time.Duration
	maxHeld  int
	maxBytes int64
	out      chan<- T // the engine's input
	// sent counts the transactions handed to the engine, committed (set
	// by the engine's goroutine) those it committed; settled is signalled
	// after each commit.
	sent      int64
	committed atomic.Int64
	settled   chan struct{}

	done position.Position // covered by the transactions handed to the engine
	cur  position.Position // covered once the open transaction commits
	open bool              // a Kafka transaction is open
	held int               // its events
	size int64             // their bytes
	// began is when the open transaction began; lastIn when the latest
	// event arrived.
	began, lastIn time.Time
	boundary      bool // the open transaction ends at a PostgreSQL commit
}

// feedBuffer is the events the feeder may hand over ahead of the engine.
const feedBuffer = 1024

// New is a feeder of eng. The caller's transactional producer has
// initialised already, so an earlier producer of the slot is fenced and
// its open transaction aborted: cfg.Done, read after that, covers every
// transaction that will ever commit under this id.
func New[T any](cfg Config, eng Engine[T], items Items[T]) *Feeder[T] {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feeder[T]{
		eng: eng, items: items, log: log, topic: cfg.Topic, slot: cfg.Slot, interval: cfg.Interval,
		maxHeld: max(1, cfg.MaxHeld), maxBytes: max(1, cfg.MaxBytes),
		done: cfg.Done, settled: make(chan struct{}, 1),
	}
}

// Feed runs the feeder and the engine until in closes (the open
// transaction is then committed) or ctx ends (it is aborted).
func (f *Feeder[T]) Feed(ctx context.Context, in <-chan T) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan T, feedBuffer)
	f.out = out
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer close(out)
		f.run(ctx, in)
	}()
	err := f.eng.Run(ctx, out, true)
	cancel()
	<-fed
	if !errors.Is(err, produce.ErrFenced) { // a fenced producer's abort is refused
		f.abort()
	}
	return err
}

// abortGrace bounds the abort of a transaction a session leaves open: the
// wait for the produce requests still out, then the abort itself.
const abortGrace = time.Second

// abort aborts the transaction the engine left open, so read_committed
// readers need not wait for the next session; when it cannot, the next
// session's producer aborts it as it fences this one.
func (f *Feeder[T]) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), abortGrace)
	defer cancel()
	if err := f.eng.Abort(ctx, abortGrace); err != nil {
		f.log.Info("exactly-once: the open Kafka transaction is left to the next session's producer to abort", "err", err)
	}
}

// run cuts the events of in into transactions until in closes or ctx
// ends.
func (f *Feeder[T]) run(ctx context.Context, in <-chan T) {
	f.log.Info("exactly-once: resuming after the recorded position", "position_topic", f.topic,
		"final_lsn", f.done.FinalLSN, "end_lsn", f.done.EndLSN, "row_lsn", f.done.RowLSN)
	tick := time.NewTicker(max(f.interval/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case p, ok := <-in:
			if !ok {
				f.commit(ctx)
				return
			}
			f.take(ctx, p)
			f.commitIfIdle(ctx, in)
		case <-f.settled:
			f.commitIfIdle(ctx, in)
		case now := <-tick.C:
			if f.due(now) {
				f.commit(ctx)
			}
		case <-ctx.Done():
			return
		}
	}
}

// commitIfIdle commits the open transaction at a PostgreSQL commit when
// nothing more is queued and the engine commits no other: rather than wait
// for the interval. Under load events queue up while a commit is under
// way, so transactions grow with the load; once it committed, the next one
// commits at the first boundary with nothing queued.
func (f *Feeder[T]) commitIfIdle(ctx context.Context, in <-chan T) {
	if f.open && f.boundary && len(in) == 0 && f.committed.Load() == f.sent {
		f.commit(ctx)
	}
}

// due reports whether the open transaction should commit now.
func (f *Feeder[T]) due(now time.Time) bool {
	if !f.open {
		return false
	}
	return (f.boundary && now.Sub(f.began) >= f.interval) || now.Sub(f.lastIn) >= f.interval
}

// take hands an event to the open transaction, opening one if none is,
// and commits it once it holds MaxHeld events or MaxBytes. A
// transaction-end marker moves the position past its transaction.
func (f *Feeder[T]) take(ctx context.Context, p T) {
	e := f.items.Of(p)
	if e.Marker { // the end of a PostgreSQL transaction
		if f.open {
			f.cur = position.Max(f.cur, position.Position{FinalLSN: e.Txn, EndLSN: e.End})
			f.boundary = true
		}
		return
	}
	f.lastIn = time.Now()
	if f.done.Covers(e.Txn, e.LSN) {
		f.items.Skip(p) // in a committed Kafka transaction already
		return
	}
	if !f.send(ctx, p) {
		return
	}
	if !f.open {
		f.open, f.began = true, f.lastIn
	}
	f.held++
	f.size += int64(e.Size)
	f.cur = position.Max(f.cur, position.Position{FinalLSN: e.Txn, RowLSN: e.LSN})
	f.boundary = false
	if f.held >= f.maxHeld || f.size >= f.maxBytes {
		f.commit(ctx)
	}
}

// send hands p to the engine; false when ctx ended first.
func (f *Feeder[T]) send(ctx context.Context, p T) bool {
	select {
	case f.out <- p:
		return true
	case <-ctx.Done():
		return false
	}
}

// commit ends the open transaction with the position record: the engine
// commits it once its records are settled, and only then acks them.
func (f *Feeder[T]) commit(ctx context.Context) {
	if !f.open {
		return
	}
	next := position.Max(f.done, f.cur)
	marker := f.items.Position(&sarama.ProducerMessage{Topic: f.topic, Key: sarama.StringEncoder(f.slot),
		Value: sarama.ByteEncoder(position.Encode(f.slot, next))})
	if !f.send(ctx, marker) {
		return
	}
	f.held, f.size, f.open, f.boundary, f.done = 0, 0, false, false, next
	f.sent++
}

// Committed is the engine's word that a transaction it was handed
// committed.
func (f *Feeder[T]) Committed() {
	f.committed.Add(1)
	select {
	case f.settled <- struct{}{}:
	default:
	}
}

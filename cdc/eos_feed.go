package cdc

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc/position"
	"github.com/eventforge/eventforge/cdc/produce"
	"github.com/eventforge/eventforge/internal/shared/failpoint"
)

// eosFeeder is the exactly-once Kafka side of a session
// (docs/design.md#exactly-once): it cuts the stream's events into Kafka
// transactions for the produce engine, each closed by a record of the
// relay's position on the compacted position topic. The engine, the slot's
// transactional producer, commits a transaction once each of its records
// is settled (appended, or refused for good and set aside) and acks its
// events only then. Events a committed transaction already holds (the
// position read at the session's start covers them) are acked without
// being produced.
//
// A Kafka transaction ends at a PostgreSQL transaction boundary when no
// more events are queued or once it is TxnInterval old, or anywhere when the
// stream went quiet for TxnInterval or when it holds half the in-flight
// window (a large PostgreSQL transaction then spans several Kafka
// transactions; the position records the last INSERT included). Any error
// of the engine ends the session; the open transaction is aborted then,
// or, when that fails, by the next session's producer, which fences this
// one.
type eosFeeder struct {
	ps       *producerSession
	topic    string // the position topic
	slot     string
	interval time.Duration
	maxHeld  int
	maxBytes int64
	out      chan<- *pending // the engine's input
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

// eosFeedBuffer is the events the feeder may hand over ahead of the
// engine.
const eosFeedBuffer = 1024

// newEOSFeeder ensures the position topic and reads the position from it.
// ps's transactional producer has initialised already, so an earlier
// producer of the slot is fenced and its open transaction aborted: the read
// sees every transaction that will ever commit under this id.
func newEOSFeeder(ctx context.Context, ps *producerSession) (*eosFeeder, error) {
	topic := ps.cfg.positionTopic()
	if err := ps.topics.EnsureCompacted(ctx, topic); err != nil {
		return nil, err
	}
	pos, err := position.Read(ctx, ps.client, topic, ps.cfg.Slot)
	if err != nil {
		return nil, err
	}
	return &eosFeeder{
		ps: ps, topic: topic, slot: ps.cfg.Slot, interval: ps.cfg.TxnInterval,
		maxHeld: max(1, ps.cfg.MaxInFlightEvents/2), maxBytes: max(1, ps.cfg.MaxInFlightBytes/2),
		done: pos, settled: make(chan struct{}, 1),
	}, nil
}

// feed runs the feeder and the engine until in closes (the open
// transaction is then committed) or ctx ends (it is aborted).
func (f *eosFeeder) feed(ctx context.Context, in <-chan *pending) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan *pending, eosFeedBuffer)
	f.out = out
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer close(out)
		f.run(ctx, in)
	}()
	err := f.ps.eng.Run(ctx, out, true)
	cancel()
	<-fed
	if !errors.Is(err, produce.ErrFenced) { // a fenced producer's abort is refused
		f.abort()
	}
	return err
}

// eosAbortGrace bounds the abort of a transaction a session leaves open:
// the wait for the produce requests still out, then the abort itself.
const eosAbortGrace = time.Second

// abort aborts the transaction the engine left open, so read_committed
// readers need not wait for the next session; when it cannot, the next
// session's producer aborts it as it fences this one.
func (f *eosFeeder) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), eosAbortGrace)
	defer cancel()
	if err := f.ps.eng.Abort(ctx, eosAbortGrace); err != nil {
		f.ps.log.Info("exactly-once: the open Kafka transaction is left to the next session's producer to abort", "err", err)
	}
}

// run cuts the events of in into transactions until in closes or ctx
// ends.
func (f *eosFeeder) run(ctx context.Context, in <-chan *pending) {
	f.ps.log.Info("exactly-once: resuming after the recorded position", "position_topic", f.topic,
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
func (f *eosFeeder) commitIfIdle(ctx context.Context, in <-chan *pending) {
	if f.open && f.boundary && len(in) == 0 && f.committed.Load() == f.sent {
		f.commit(ctx)
	}
}

// due reports whether the open transaction should commit now.
func (f *eosFeeder) due(now time.Time) bool {
	if !f.open {
		return false
	}
	return (f.boundary && now.Sub(f.began) >= f.interval) || now.Sub(f.lastIn) >= f.interval
}

// take hands an event to the open transaction, opening one if none is,
// and commits it once it holds half the in-flight window. A
// transaction-end marker moves the position past its transaction.
func (f *eosFeeder) take(ctx context.Context, p *pending) {
	if p.msg == nil { // the end of a PostgreSQL transaction
		if f.open {
			f.cur = position.Max(f.cur, position.Position{FinalLSN: p.txn, EndLSN: p.end})
			f.boundary = true
		}
		return
	}
	f.lastIn = time.Now()
	if f.done.Covers(p.txn, p.lsn) {
		f.ps.m.eosSkipped.Inc()
		f.ps.tr.Ack(p.tok) // in a committed Kafka transaction already
		return
	}
	if !f.send(ctx, p) {
		return
	}
	if !f.open {
		f.open, f.began = true, f.lastIn
	}
	f.held++
	f.size += int64(p.size)
	f.cur = position.Max(f.cur, position.Position{FinalLSN: p.txn, RowLSN: p.lsn})
	f.boundary = false
	if f.held >= f.maxHeld || f.size >= f.maxBytes {
		f.commit(ctx)
	}
}

// send hands p to the engine; false when ctx ended first.
func (f *eosFeeder) send(ctx context.Context, p *pending) bool {
	select {
	case f.out <- p:
		return true
	case <-ctx.Done():
		return false
	}
}

// commit ends the open transaction with the position record: the engine
// commits it once its records are settled, and only then acks them.
func (f *eosFeeder) commit(ctx context.Context) {
	if !f.open {
		return
	}
	next := position.Max(f.done, f.cur)
	marker := &pending{ends: true}
	marker.msg = &sarama.ProducerMessage{Topic: f.topic, Key: sarama.StringEncoder(f.slot),
		Value: sarama.ByteEncoder(position.Encode(f.slot, next)), Metadata: marker}
	marker.size = marker.msg.ByteSize(2)
	if !f.send(ctx, marker) {
		return
	}
	f.held, f.size, f.open, f.boundary, f.done = 0, 0, false, false, next
	f.sent++
}

// txnCommitted is the engine's word that a transaction it was handed
// committed.
func (f *eosFeeder) txnCommitted() {
	f.committed.Add(1)
	select {
	case f.settled <- struct{}{}:
	default:
	}
}

// committing is the engine's call just before a Kafka transaction commits.
func (ps *producerSession) committing() { failpoint.Hit(failpoint.CDCEOSBeforeKafkaCommit) }

// committed hears of a Kafka transaction's commit, before its events are
// acked.
func (ps *producerSession) committed(records int, err error) {
	if err != nil {
		ps.m.kafkaTxns.WithLabelValues("failed").Inc()
		ps.log.Warn("Kafka transaction not committed: it is aborted, its events are sent again by the next session",
			"records", records, "err", err)
		return
	}
	ps.m.kafkaTxns.WithLabelValues("committed").Inc()
	failpoint.Hit(failpoint.CDCEOSAfterKafkaCommit)
	if ps.eos != nil {
		ps.eos.txnCommitted()
	}
}

// positionTopicSuffix names the exactly-once relay's position topic after
// the topic prefix, unless --position-topic names it.
const positionTopicSuffix = "eventforge.positions"

// positionTopic is the compacted topic holding the exactly-once position of
// each slot (key: the slot name).
func (c *Config) positionTopic() string {
	if c.PositionTopic != "" {
		return c.PositionTopic
	}
	return c.TopicPrefix + positionTopicSuffix
}

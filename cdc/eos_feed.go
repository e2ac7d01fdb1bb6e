package cdc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc/position"
	"github.com/eventforge/eventforge/cdc/produce"
	"github.com/eventforge/eventforge/internal/failpoint"
)

// eosFeeder is the exactly-once Kafka side of a session
// (docs/design.md#exactly-once): events go out inside Kafka transactions,
// each closed by a record of the relay's position on the compacted position
// topic, and the tracker hears of an event only once the transaction that
// holds it committed. Events a committed transaction already holds (the
// position read at the session's start covers them) are acked without being
// produced.
//
// A Kafka transaction ends at a PostgreSQL transaction boundary when no
// more events are queued or once it is TxnInterval old, or anywhere when the
// stream went quiet for TxnInterval or when it holds half the in-flight
// window (a large PostgreSQL transaction
// then spans several Kafka transactions; the position records the last
// INSERT included). Any error of the producer ends the session and leaves
// the open transaction to be aborted by the next session's producer, which
// fences this one.
type eosFeeder struct {
	ps       *producerSession
	topic    string // the position topic
	slot     string
	interval time.Duration
	maxHeld  int
	maxBytes int64
	errs     chan *sarama.ProducerError

	done position.Position // covered by committed Kafka transactions
	cur  position.Position // covered once the open transaction commits
	open bool              // a Kafka transaction is open
	held []*pending        // its events
	size int64             // their bytes
	// began is when the open transaction began; lastIn when the latest
	// event arrived.
	began, lastIn time.Time
	boundary      bool // the open transaction ends at a PostgreSQL commit
}

// newEOSFeeder ensures the position topic and reads the position from it.
// ps's transactional producer has initialised already, so an earlier
// producer of the slot is fenced and its open transaction aborted: the read
// sees every transaction that will ever commit under this id.
func newEOSFeeder(ctx context.Context, ps *producerSession) (*eosFeeder, error) {
	topic := ps.cfg.positionTopic()
	if err := ps.topics.EnsureCompacted(ctx, topic); err != nil {
		return nil, err
	}
	pos, err := readPosition(ctx, ps.client, topic, ps.cfg.Slot)
	if err != nil {
		return nil, err
	}
	return &eosFeeder{
		ps: ps, topic: topic, slot: ps.cfg.Slot, interval: ps.cfg.TxnInterval,
		maxHeld: max(1, ps.cfg.MaxInFlightEvents/2), maxBytes: max(1, ps.cfg.MaxInFlightBytes/2),
		errs: make(chan *sarama.ProducerError, 16), done: pos,
	}, nil
}

// startDrainers drains the producer's two result channels: successes are
// settled at commit, the first errors are kept for run.
func (f *eosFeeder) startDrainers() <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range f.ps.prod.Successes() {
		}
	}()
	go func() {
		defer wg.Done()
		for pe := range f.ps.prod.Errors() {
			select {
			case f.errs <- pe:
			default: // one error ends the session; the first few explain it
			}
		}
	}()
	go func() { wg.Wait(); close(done) }()
	return done
}

// run produces events from in until in closes (then it commits what is
// open) or ctx ends (then the open transaction is left to be aborted).
func (f *eosFeeder) run(ctx context.Context, in <-chan *pending) error {
	f.ps.log.Info("exactly-once: resuming after the recorded position", "position_topic", f.topic,
		"final_lsn", f.done.FinalLSN, "end_lsn", f.done.EndLSN, "row_lsn", f.done.RowLSN)
	tick := time.NewTicker(max(f.interval/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case p, ok := <-in:
			if !ok {
				return f.commit()
			}
			if err := f.take(ctx, p); err != nil {
				return err
			}
			if f.open && f.boundary && len(in) == 0 {
				// Nothing more is queued: commit now rather than wait for
				// the interval. Under load events queue up while a commit
				// is under way, so transactions grow with the load.
				if err := f.commit(); err != nil {
					return err
				}
			}
		case pe := <-f.errs:
			return f.failed(ctx, pe)
		case now := <-tick.C:
			if f.due(now) {
				if err := f.commit(); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// due reports whether the open transaction should commit now.
func (f *eosFeeder) due(now time.Time) bool {
	if !f.open {
		return false
	}
	return (f.boundary && now.Sub(f.began) >= f.interval) || now.Sub(f.lastIn) >= f.interval
}

func (f *eosFeeder) take(ctx context.Context, p *pending) error {
	if p.msg == nil { // the end of a PostgreSQL transaction
		if f.open {
			f.cur = position.Max(f.cur, position.Position{FinalLSN: p.txn, EndLSN: p.end})
			f.boundary = true
		}
		return nil
	}
	f.lastIn = time.Now()
	if f.done.Covers(p.txn, p.lsn) {
		f.ps.m.eosSkipped.Inc()
		f.ps.tr.Ack(p.tok) // in a committed Kafka transaction already
		return nil
	}
	send, err := f.ps.handle(ctx, p)
	if err != nil || !send {
		return err
	}
	alone := f.ps.suspects.has(p.id, p.lsn)
	if alone { // in a transaction of its own, where a refusal is its own
		if err := f.commit(); err != nil {
			return err
		}
	}
	if !f.open {
		if err := f.ps.prod.BeginTxn(); err != nil {
			return fmt.Errorf("begin Kafka transaction: %w", err)
		}
		f.open, f.began = true, time.Now()
	}
	select {
	case f.ps.prod.Input() <- p.msg:
	case pe := <-f.errs:
		return f.failed(ctx, pe)
	case <-ctx.Done():
		return nil
	}
	failpoint.Hit(failpoint.CDCAfterProduceBeforeAck)
	f.held = append(f.held, p)
	f.size += int64(p.size)
	f.cur = position.Max(f.cur, position.Position{FinalLSN: p.txn, RowLSN: p.lsn})
	f.boundary = false
	if alone || len(f.held) >= f.maxHeld || f.size >= f.maxBytes {
		return f.commit()
	}
	return nil
}

// commit writes the position into the open transaction, commits it, and
// only then acks its events.
func (f *eosFeeder) commit() error {
	if !f.open {
		return nil
	}
	next := position.Max(f.done, f.cur)
	f.ps.prod.Input() <- &sarama.ProducerMessage{Topic: f.topic, Key: sarama.StringEncoder(f.slot),
		Value: sarama.ByteEncoder(position.Encode(f.slot, next))}
	failpoint.Hit(failpoint.CDCEOSBeforeKafkaCommit)
	if err := f.ps.prod.CommitTxn(); err != nil {
		f.ps.m.kafkaTxns.WithLabelValues("failed").Inc()
		err = f.commitFailed(err)
		f.ps.log.Warn("Kafka transaction not committed: it is aborted, its events are sent again by the next session", "events", len(f.held), "err", err)
		return err
	}
	f.ps.m.kafkaTxns.WithLabelValues("committed").Inc()
	failpoint.Hit(failpoint.CDCEOSAfterKafkaCommit)
	for i, p := range f.held {
		f.ps.suspects.clear(p.id, p.lsn)
		f.ps.delivered(p)
		f.held[i] = nil
	}
	f.held, f.size, f.open, f.boundary, f.done = f.held[:0], 0, false, false, next
	return nil
}

// commitFailed explains a failed commit: a record's own error when one was
// returned (it decides, as in failed), else the commit's.
func (f *eosFeeder) commitFailed(err error) error {
	select {
	case pe := <-f.errs:
		return f.failed(context.Background(), pe)
	default:
	}
	if fenced(err) {
		return fmt.Errorf("commit Kafka transaction: fenced: another relay took over this slot's transactional id: %w", err)
	}
	return fmt.Errorf("commit Kafka transaction: %w", err)
}

// fenced reports an error of a producer whose transactional id a newer
// producer took over.
func fenced(err error) bool {
	return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch)
}

// failed ends the session on a record's error; the open transaction will be
// aborted. A record the broker refuses for good is first set aside in
// outbox_rejected, so the next session skips it instead of failing on it
// again (docs/design.md#rejected-records).
func (f *eosFeeder) failed(ctx context.Context, pe *sarama.ProducerError) error {
	f.ps.m.publishErrors.Inc()
	if fenced(pe.Err) {
		return fmt.Errorf("produce in a Kafka transaction: fenced: another relay took over this slot's transactional id: %w", pe.Err)
	}
	p, ok := pe.Msg.Metadata.(*pending)
	if !ok {
		return fmt.Errorf("produce position record to %s: %w", f.topic, pe.Err)
	}
	class, err := refusalClass(ctx, p, pe.Err, f.ps.tooLarge)
	if err != nil {
		return err
	}
	switch class {
	case produce.Reject:
		return f.rejected(ctx, p, pe.Err)
	case produce.Fatal:
		return fatal(fmt.Errorf("produce event %s to %s: %w: %s", p.id, p.msg.Topic, pe.Err, produce.FatalHint(pe.Err)))
	}
	return fmt.Errorf("produce event %s to %s in a Kafka transaction: %w", p.id, p.msg.Topic, pe.Err)
}

// rejected handles a record refused for good. The error of a batch reaches
// every record of it, so p is guilty only when it was alone in its
// transaction or its own check found it too large; otherwise every held
// record of its partition becomes a suspect, and the next session sends
// each suspect alone. The Kafka transaction is aborted either way.
func (f *eosFeeder) rejected(ctx context.Context, p *pending, err error) error {
	guilty := len(f.held) == 1 || produce.Classify(err) == produce.TooLarge
	if !guilty {
		n := 0
		for _, h := range f.held {
			if h.msg.Topic == p.msg.Topic && h.msg.Partition == p.msg.Partition {
				f.ps.suspects.add(h.id, h.lsn)
				n++
			}
		}
		return fmt.Errorf("produce to %s/%d: the broker refused a batch of %d events (%w); the Kafka transaction is aborted and its events are sent again one per transaction to find the refused ones",
			p.msg.Topic, p.msg.Partition, n, err)
	}
	f.ps.suspects.clear(p.id, p.lsn)
	if err := f.ps.reject(ctx, p); err != nil {
		return err
	}
	return fmt.Errorf("produce event %s to %s: set aside in outbox_rejected; the Kafka transaction is aborted and sent again without it: %w", p.id, p.msg.Topic, err)
}

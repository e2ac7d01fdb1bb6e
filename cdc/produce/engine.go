// Package produce is the relay's produce engine: it writes records to Kafka
// in the order they are handed over, per partition, with an idempotent
// producer built on sarama's protocol layer (docs/design.md#generations).
//
// The engine computes each record's partition itself (the Java client's
// murmur2 of the key) and keeps, per partition, at most one generation in
// flight: a run of consecutive records sent as one record batch. A record
// batch is appended whole or refused whole, so a generation either landed
// or did not; the partition's next generation is cut only when every record
// of the previous one is settled (delivered, or set aside). Many partitions
// are in flight at once, their generations sharing one produce request per
// broker. On any error the partition stops and sends again from its first
// unsettled record: nothing behind a failure can land before it.
//
// A record the broker refuses for good is set aside alone: the produce
// response names the guilty records of a batch (per-record errors), and
// where it does not, the generation is sent again one record at a time to
// find them. Its neighbours are published, in order.
//
// With a transactional id (Config.TransactionalID) the engine is that id's
// transactional producer (docs/design.md#exactly-once): it fences every
// earlier producer of the id when it starts, adds each partition to the
// open transaction before its first batch in it, and commits once a
// Record with Commit set and every record before it are settled; records
// are delivered only after their transaction committed. Generations,
// retries and rejections work as above, inside the transaction.
//
// Imports (floor: shared library): sarama, internal/shared/kafka (the partitioner)
// and internal/shared/backoff only; the relay's packages plug in through Hooks.
package produce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// Record is one record to produce. The engine sets Msg.Partition, and
// Offset before Delivered (-1 when the broker answered a duplicate without
// it) or Reason before Reject.
type Record struct {
	Msg    *sarama.ProducerMessage
	Size   int    // encoded size, as sarama's ProducerMessage.ByteSize(2)
	Reason string // why the broker refused it for good
	Offset int64
	// Commit, with a transactional engine, makes the record the last of
	// its Kafka transaction (the relay's position record): the
	// transaction commits once every record handed over before it is
	// settled, and Run takes no other record meanwhile. It skips Admit.
	Commit bool
}

// Hooks are what the engine's user does with records.
type Hooks struct {
	// Admit checks a record before it is queued; false means it was
	// settled already (set aside or skipped) and the engine forgets it.
	Admit func(ctx context.Context, r *Record) (bool, error)
	// Delivered is called once the broker acknowledged r, in order within
	// its partition.
	Delivered func(r *Record)
	// Reject records r (r.Reason set) durably; then the engine goes on.
	Reject func(ctx context.Context, r *Record) error
	// TooLarge decides on a record refused alone as too large: the reason
	// to set it aside, or an error that ends Run.
	TooLarge func(ctx context.Context, r *Record, err error) (string, error)
	// Failed sees every refusal, once per record it covers.
	Failed func(r *Record, err error)
	// Fatal makes the error Run returns for a refusal no retry can fix.
	Fatal func(r *Record, err error) error
	// Produced, if set, is called by a sender each time the broker
	// accepted a request, before its records are settled (a failpoint of
	// the relay's tests: the records are in Kafka, not yet acked). It runs
	// on the sender's goroutine.
	Produced func()
	// Committing, if set, is called by a transactional engine just before
	// it commits a transaction (a failpoint of the relay's tests).
	Committing func()
	// Committed, if set, hears of a transactional engine's commit of a
	// transaction holding n records: err nil when it committed, before
	// their Delivered calls.
	Committed func(n int, err error)
}

// Cluster is what the engine needs of a sarama.Client.
type Cluster interface {
	Partitions(topic string) ([]int32, error)
	Leader(topic string, partition int32) (*sarama.Broker, error)
	Brokers() []*sarama.Broker
	Broker(brokerID int32) (*sarama.Broker, error)
	Config() *sarama.Config
	InitProducerID() (*sarama.InitProducerIDResponse, error)
	TransactionCoordinator(transactionalID string) (*sarama.Broker, error)
	RefreshTransactionCoordinator(transactionalID string) error
}

// Engine produces the records of the items handed to Run (T is the
// caller's item; rec gives its Record). One goroutine runs Run and owns
// every field but the senders' queues.
type Engine[T any] struct {
	rec     func(T) *Record
	cfg     Config
	cluster Cluster
	hooks   Hooks
	log     *slog.Logger
	version int16
	pid     int64
	epoch   int16
	txn     *txn // transactional mode only
	leaders *kafka.LeaderLookup

	parts   map[partKey]*partition
	counts  map[string]int // partition count per topic
	dirty   []*partition   // may have a generation to cut
	linger  *time.Timer    // wakes Run when a lingering partition is due
	lingerC <-chan time.Time
	senders map[*sarama.Broker]*sender[T]
	results chan *flight
	retry   chan retried
	stopped chan struct{}
	wg      sync.WaitGroup
	open    int // admitted and not yet settled
}

type partKey struct {
	topic     string
	partition int32
}

// partition is one partition's queue and its generation in flight.
type partition struct {
	partKey
	queue    []*Record
	bytes    int         // of the queue's records
	gen      *generation // in flight, or waiting to be sent again
	seq      int32       // the sequence number of the next generation
	attempts int         // retriable refusals of gen
	isolate  int         // records still to send one per generation
	limit    int         // records per generation after a too-large refusal; 0: none
	marked   bool        // in Engine.dirty
	since    time.Time   // when the oldest queued record found p idle (Linger)
}

// New returns an engine with a producer id of its own (an idempotent
// producer: the broker drops a generation sent twice). With
// cfg.TransactionalID it is that id's transactional producer: every earlier
// producer of the id is fenced, its open transaction aborted, before New
// returns.
func New[T any](ctx context.Context, cfg Config, cluster Cluster, hooks Hooks, rec func(T) *Record, log *slog.Logger) (*Engine[T], error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pid, epoch, err := initProducerID(ctx, cluster, &cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine[T]{
		rec: rec, cfg: cfg, cluster: cluster, hooks: hooks, log: log, version: cfg.requestVersion(),
		pid: pid, epoch: epoch,
		parts: map[partKey]*partition{}, counts: map[string]int{}, senders: map[*sarama.Broker]*sender[T]{},
		results: make(chan *flight, 64), retry: make(chan retried), stopped: make(chan struct{}),
		leaders: kafka.NewLeaderLookup(cluster),
	}
	if cfg.TransactionalID != "" {
		e.txn = &txn{id: cfg.TransactionalID, added: map[partKey]bool{}, ends: map[partKey]bool{}}
	}
	return e, nil
}

// Open is the number of records admitted and not yet settled.
func (e *Engine[T]) Open() int { return e.open }

// Run produces records from in until in closes (and, with untilSettled,
// every admitted record is settled) or ctx ends. Its error ends the
// session; records not settled then are the caller's to send again. A
// transactional engine's records are settled once their transaction
// committed; a transaction not committed when Run returns is left open,
// for Abort, or the next producer of the id, to abort.
func (e *Engine[T]) Run(ctx context.Context, in <-chan T, untilSettled bool) error {
	defer close(e.stopped)
	defer func() {
		if e.linger != nil {
			e.linger.Stop()
		}
	}()
	for {
		closed, err := e.pump(ctx, in)
		if err == nil {
			err = e.dispatch(ctx)
		}
		if err != nil {
			return err
		}
		if closed {
			in = nil
		}
		if in == nil && !e.committing() && (!untilSettled || e.open == 0) {
			return nil
		}
		if in, err = e.next(ctx, in); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// dispatch sends the generations that are due and commits a transaction
// whose records are all settled.
func (e *Engine[T]) dispatch(ctx context.Context) error {
	if err := e.flush(ctx); err != nil {
		return err
	}
	return e.commitIfSettled(ctx)
}

// next waits for the next thing to do and does it: a record to admit
// (none while a transaction commits), a request's outcome, a retry, a
// linger's end, or ctx's end. It returns in, or nil once in closed.
func (e *Engine[T]) next(ctx context.Context, in <-chan T) (<-chan T, error) {
	src := in
	if e.committing() {
		src = nil // the transaction's records are all in: no more until it commits
	}
	select {
	case r, ok := <-src:
		if !ok {
			return nil, nil
		}
		return in, e.admit(ctx, r)
	case f := <-e.results:
		return in, e.settle(ctx, f)
	case r := <-e.retry:
		if r.moved {
			r.p.attempts = 0 // a new leader: its refusals count from the start
		}
		e.send(r.p.gen)
	case <-e.lingerC:
		e.lingerC = nil
	case <-ctx.Done():
	}
	return in, nil
}

// Done is closed when Run returned.
func (e *Engine[T]) Done() <-chan struct{} { return e.stopped }

// Wait waits for the senders and the retries to end; one in a request ends
// when the request does (closing the client ends it at once).
func (e *Engine[T]) Wait() { e.wg.Wait() }

// pumpBurst bounds the operations of one pump, so Run still notices ctx
// and retries while records keep coming.
const pumpBurst = 512

// pump settles results and admits records while each is ready at once;
// generations are cut after it, so a burst of records becomes one
// generation. It reports whether in closed; a nil in is not read.
func (e *Engine[T]) pump(ctx context.Context, in <-chan T) (bool, error) {
	for range pumpBurst {
		select {
		case f := <-e.results:
			if err := e.settle(ctx, f); err != nil {
				return false, err
			}
			continue
		default:
		}
		if in == nil || e.committing() {
			return false, nil
		}
		select {
		case r, ok := <-in:
			if !ok {
				return true, nil
			}
			if err := e.admit(ctx, r); err != nil {
				return false, err
			}
		default:
			return false, nil
		}
	}
	return false, nil
}

// admit queues item's record on its partition.
func (e *Engine[T]) admit(ctx context.Context, item T) error {
	r := e.rec(item)
	if r.Commit && e.txn != nil {
		e.txn.ending = true
	} else if send, err := e.hooks.Admit(ctx, r); err != nil || !send {
		return err
	}
	p, err := e.partitionOf(r.Msg)
	if errors.Is(err, kafka.ErrNoKey) {
		r.Reason = "the record has no key: records are keyed by aggregate id"
		return e.hooks.Reject(ctx, r)
	}
	if err != nil {
		return err
	}
	if r.Commit && e.txn != nil {
		e.txn.ends[p.partKey] = true
	}
	e.open++
	p.queue = append(p.queue, r)
	p.bytes += r.Size
	e.mark(p)
	return nil
}

// partitionOf sets msg.Partition where the Java client would put it and
// returns that partition's state.
func (e *Engine[T]) partitionOf(msg *sarama.ProducerMessage) (*partition, error) {
	n, ok := e.counts[msg.Topic]
	if !ok {
		ps, err := e.cluster.Partitions(msg.Topic)
		if err != nil {
			return nil, fmt.Errorf("read partitions of %s: %w", msg.Topic, err)
		}
		if len(ps) == 0 {
			return nil, fmt.Errorf("read partitions of %s: %w", msg.Topic, sarama.ErrLeaderNotAvailable)
		}
		n = len(ps)
		e.counts[msg.Topic] = n
	}
	if msg.Key == nil {
		return nil, kafka.ErrNoKey
	}
	key, err := msg.Key.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	msg.Partition = kafka.PartitionForKey(key, int32(n))
	k := partKey{msg.Topic, msg.Partition}
	p := e.parts[k]
	if p == nil {
		p = &partition{partKey: k}
		e.parts[k] = p
	}
	return p, nil
}

func (e *Engine[T]) mark(p *partition) {
	if !p.marked {
		p.marked = true
		e.dirty = append(e.dirty, p)
	}
}

// flush cuts a generation on every marked partition that has none and
// need not linger; a lingering partition stays marked, and Run wakes when
// the first of them is due.
func (e *Engine[T]) flush(ctx context.Context) error {
	now := time.Now()
	var gens []*generation
	var wake time.Time
	keep := e.dirty[:0]
	for _, p := range e.dirty {
		if p.gen != nil || len(p.queue) == 0 {
			p.marked, p.since = false, time.Time{}
			continue
		}
		if due := e.lingerUntil(p, now); due.After(now) {
			keep = append(keep, p)
			if wake.IsZero() || due.Before(wake) {
				wake = due
			}
			continue
		}
		p.marked, p.since = false, time.Time{}
		gens = append(gens, e.cut(p))
	}
	clear(e.dirty[len(keep):])
	e.dirty = keep
	if !wake.IsZero() && e.lingerC == nil {
		e.armLinger(wake.Sub(now))
	}
	if e.txn != nil && len(gens) > 0 {
		if err := e.addPartitions(ctx, gens); err != nil {
			return err
		}
	}
	for _, g := range gens {
		e.send(g)
	}
	return nil
}

// lingerUntil is when p's queue goes out at the latest: now when no
// Linger is set or the queue fills a generation.
func (e *Engine[T]) lingerUntil(p *partition, now time.Time) time.Time {
	if e.cfg.Linger <= 0 || len(p.queue) >= e.cfg.MaxGenerationRecords || p.isolate > 0 || e.committing() {
		return now
	}
	if p.bytes >= e.cfg.MaxGenerationBytes || (e.cfg.LingerBytes > 0 && p.bytes >= e.cfg.LingerBytes) {
		return now
	}
	if p.since.IsZero() {
		p.since = now
	}
	return p.since.Add(e.cfg.Linger)
}

func (e *Engine[T]) armLinger(d time.Duration) {
	if e.linger == nil {
		e.linger = time.NewTimer(d)
	} else {
		e.linger.Reset(d)
	}
	e.lingerC = e.linger.C
}

// cut takes p's next generation off its queue.
func (e *Engine[T]) cut(p *partition) *generation {
	most := e.cfg.MaxGenerationRecords
	if p.limit > 0 {
		most = min(most, p.limit)
	}
	if p.isolate > 0 {
		most = 1
	}
	n, bytes := 0, 0
	for n < len(p.queue) && n < most {
		size := p.queue[n].Size
		if n > 0 && bytes+size > e.cfg.MaxGenerationBytes {
			break
		}
		bytes += size
		n++
	}
	g := &generation{part: p, records: append([]*Record(nil), p.queue[:n]...), firstSeq: p.seq, bytes: bytes}
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	p.bytes -= bytes
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	p.gen = g
	return g
}

// send hands g to the sender of its partition's leader.
func (e *Engine[T]) send(g *generation) {
	g.to = kafka.NoBroker
	broker, err := e.leaderOf(g.part)
	if err != nil {
		// Settled by Run like any failed request; never sent from here,
		// where a full results channel would block its only reader.
		f := &flight{gens: []*generation{g}, err: fmt.Errorf("find the leader: %w", err)}
		go func() {
			select {
			case e.results <- f:
			case <-e.stopped:
			}
		}()
		return
	}
	g.to = broker.ID()
	s := e.senders[broker]
	if s == nil {
		s = &sender[T]{e: e, broker: broker, wake: make(chan struct{}, 1)}
		e.senders[broker] = s
		e.wg.Add(1)
		go s.run()
	}
	s.add(g)
}

// settle acts on one request's outcome, generation by generation.
func (e *Engine[T]) settle(ctx context.Context, f *flight) error {
	for _, g := range f.gens {
		block, err := f.outcome(g)
		if err == nil || errors.Is(err, sarama.ErrDuplicateSequenceNumber) {
			e.delivered(g, block, err == nil)
			continue
		}
		if err := e.refused(ctx, g, block, err); err != nil {
			return err
		}
	}
	return nil
}

// delivered settles every record of g: the batch landed.
func (e *Engine[T]) delivered(g *generation, block *sarama.ProduceResponseBlock, withOffset bool) {
	p := g.part
	p.seq = nextSeq(g.firstSeq, len(g.records))
	p.gen, p.attempts, p.limit = nil, 0, 0
	for i, r := range g.records {
		r.Offset = -1
		if withOffset && block != nil {
			r.Offset = block.Offset + int64(i)
		}
		e.settled(p)
		if e.txn != nil {
			e.txn.held = append(e.txn.held, r) // delivered once its transaction committed
		} else {
			e.hooks.Delivered(r)
		}
	}
	e.mark(p)
}

func (e *Engine[T]) settled(p *partition) {
	e.open--
	if p.isolate > 0 {
		p.isolate--
	}
}

// nextSeq is the sequence after n records from first; it wraps to 0 after
// the largest int32, as Kafka's does.
func nextSeq(first int32, n int) int32 {
	return int32((int64(first) + int64(n)) % (1 << 31))
}

// refused acts on a generation the broker did not append.
func (e *Engine[T]) refused(ctx context.Context, g *generation, block *sarama.ProduceResponseBlock, err error) error {
	for _, r := range g.records {
		e.hooks.Failed(r, err)
	}
	switch Classify(err) {
	case Reject:
		return e.rejectGuilty(ctx, g, block, err)
	case TooLarge:
		return e.tooLarge(ctx, g, err)
	case Fatal:
		return e.hooks.Fatal(g.records[0], err)
	case Restart:
		if e.txn != nil {
			return fencedError(fmt.Sprintf("produce to %s/%d in a Kafka transaction", g.part.topic, g.part.partition), err)
		}
		return fmt.Errorf("produce to %s/%d: %w (a new session starts with a new producer id)", g.part.topic, g.part.partition, err)
	}
	return e.retryLater(g, block == nil, err)
}

// rejectGuilty sets aside the records the broker refused for good and
// queues the others again, in order, at the head of their partition. When
// the response does not name the guilty records, the generation is sent
// again one record at a time.
func (e *Engine[T]) rejectGuilty(ctx context.Context, g *generation, block *sarama.ProduceResponseBlock, err error) error {
	p := g.part
	guilty := guiltyRecords(block, len(g.records))
	if guilty == nil && len(g.records) > 1 {
		e.log.Warn("the broker refused a batch without naming its records; sending them one at a time",
			"topic", p.topic, "partition", p.partition, "records", len(g.records), "error", err)
		p.isolate = max(p.isolate, len(g.records))
		e.requeue(p, g.records)
		return nil
	}
	var rest []*Record
	for i, r := range g.records {
		msg, bad := guilty[i]
		if !bad && len(g.records) > 1 {
			rest = append(rest, r)
			continue
		}
		r.Reason = fmt.Sprintf("the broker refused the record: %v", err)
		if msg != "" {
			r.Reason += ": " + msg
		}
		e.settled(p)
		if err := e.hooks.Reject(ctx, r); err != nil {
			return err
		}
	}
	e.requeue(p, rest)
	return nil
}

// guiltyRecords is the batch indexes the response names, with their
// messages, or nil when it names none.
func guiltyRecords(block *sarama.ProduceResponseBlock, n int) map[int]string {
	if block == nil || len(block.RecordErrors) == 0 {
		return nil
	}
	out := map[int]string{}
	for _, re := range block.RecordErrors {
		if int(re.BatchIndex) < 0 || int(re.BatchIndex) >= n {
			return nil // not this batch's: trust none of it
		}
		msg := ""
		if re.BatchIndexErrorMessage != nil {
			msg = *re.BatchIndexErrorMessage
		}
		out[int(re.BatchIndex)] = msg
	}
	return out
}

// tooLarge splits a generation the broker found too large, or decides on
// a single record.
func (e *Engine[T]) tooLarge(ctx context.Context, g *generation, err error) error {
	p := g.part
	if len(g.records) > 1 {
		p.limit = max(1, len(g.records)/2)
		e.requeue(p, g.records)
		return nil
	}
	r := g.records[0]
	reason, terr := e.hooks.TooLarge(ctx, r, err)
	if terr != nil {
		return terr
	}
	r.Reason = reason
	e.settled(p)
	if err := e.hooks.Reject(ctx, r); err != nil {
		return err
	}
	e.requeue(p, nil)
	return nil
}

// requeue puts records back at the head of p's queue, ends p's
// generation, and marks p to cut the next one.
func (e *Engine[T]) requeue(p *partition, records []*Record) {
	if len(records) > 0 {
		p.queue = append(records, p.queue...)
		for _, r := range records {
			p.bytes += r.Size
		}
	}
	p.gen, p.attempts = nil, 0
	e.mark(p)
}

// retryLater sends g again, unchanged (the broker drops it if it landed
// after all), after a backoff and a lookup of its partition's leader
// (retryAfter); silent means the broker gave no answer at all.
func (e *Engine[T]) retryLater(g *generation, silent bool, err error) error {
	p := g.part
	p.attempts++
	if p.attempts >= e.cfg.MaxAttempts {
		return fmt.Errorf("produce %d events to %s/%d: %w (%d attempts)", len(g.records), p.topic, p.partition, err, p.attempts)
	}
	wait := backoff.Exponential(e.cfg.RetryFirst, e.cfg.RetryMost, p.attempts-1)
	e.log.Warn("publish failed; sending the partition's records again", "topic", p.topic, "partition", p.partition,
		"events", len(g.records), "error", err, "attempt", p.attempts, "retry_in", wait)
	e.wg.Add(1)
	go e.retryAfter(p, wait, g.to, silent)
	return nil
}

package cdc

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/eventforge/eventforge/cdc/topics"

	"github.com/eventforge/eventforge/cdc/setaside"

	"github.com/IBM/sarama"
	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/position"
)

// txnProducer is the part of a transactional producer the feeder uses:
// records handed over are kept, and CommitTxn fails with commitErr.
type txnProducer struct {
	sarama.AsyncProducer // the rest is never called
	in                   chan *sarama.ProducerMessage
	begun, commits       int
	commitErr            error
}

func (p *txnProducer) Input() chan<- *sarama.ProducerMessage { return p.in }
func (p *txnProducer) BeginTxn() error                       { p.begun++; return nil }
func (p *txnProducer) CommitTxn() error                      { p.commits++; return p.commitErr }

// handed returns what the producer was given so far.
func (p *txnProducer) handed() []*sarama.ProducerMessage {
	var out []*sarama.ProducerMessage
	for {
		select {
		case m := <-p.in:
			out = append(out, m)
		default:
			return out
		}
	}
}

type countingTracker struct{ acks int }

func (c *countingTracker) Ack(ack.Token) { c.acks++ }

func newTestFeeder(t *testing.T, done position.Position, maxHeld int) (*eosFeeder, *txnProducer, *countingTracker) {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry(), "s")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	lim := topics.NewLimits(cfg.MaxMessageBytes, nil)
	prod := &txnProducer{in: make(chan *sarama.ProducerMessage, 100)}
	tr := &countingTracker{}
	ps := &producerSession{cfg: &cfg, log: slog.New(slog.DiscardHandler), m: m, tr: tr, limits: lim, prod: prod,
		topics: topics.Known("t"), maxBytes: lim.Current(), rejected: setaside.Set{}}
	f := &eosFeeder{ps: ps, topic: "positions", slot: "s", interval: 1 << 62, maxHeld: maxHeld, maxBytes: 1 << 30,
		errs: make(chan *sarama.ProducerError, 16), done: done}
	return f, prod, tr
}

func row(txn, lsn pglogrepl.LSN) *pending {
	return &pending{txn: txn, lsn: lsn, size: 10, msg: &sarama.ProducerMessage{Topic: "t"}}
}

func end(txn, endLSN pglogrepl.LSN) *pending { return &pending{txn: txn, end: endLSN} }

// positionOf decodes the position record among msgs (the last one).
func positionOf(t *testing.T, msgs []*sarama.ProducerMessage) position.Position {
	t.Helper()
	last := msgs[len(msgs)-1]
	if last.Topic != "positions" {
		t.Fatalf("the last record went to %s, want the position topic", last.Topic)
	}
	b, _ := last.Value.Encode()
	slot, p, err := position.Decode(b)
	if err != nil || slot != "s" {
		t.Fatalf("position record %s: %v", b, err)
	}
	return p
}

// TestEOSFeederSkipsAndAcksAfterCommit: events a committed transaction holds
// are acked without being produced; the others are acked only once the
// Kafka transaction that holds them committed, with the position record
// last in it.
func TestEOSFeederSkipsAndAcksAfterCommit(t *testing.T) {
	ctx := context.Background()
	f, prod, tr := newTestFeeder(t, position.Position{FinalLSN: 100, RowLSN: 60}, 1000)
	for _, p := range []*pending{row(100, 50), row(100, 60), row(100, 70), end(100, 110), row(200, 150), end(200, 210)} {
		if err := f.take(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if tr.acks != 2 {
		t.Fatalf("%d acks before the commit, want the 2 skipped events", tr.acks)
	}
	if err := f.commit(); err != nil {
		t.Fatal(err)
	}
	msgs := prod.handed()
	if tr.acks != 4 || prod.begun != 1 || prod.commits != 1 || len(msgs) != 3 {
		t.Fatalf("after the commit: %d acks, %d begun, %d commits, %d records; want 4, 1, 1, 3", tr.acks, prod.begun, prod.commits, len(msgs))
	}
	if got, want := positionOf(t, msgs), (position.Position{FinalLSN: 200, EndLSN: 210}); got != want {
		t.Fatalf("position %+v, want %+v", got, want)
	}
}

// TestEOSFeederFailedCommitAcksNothing: a commit that fails (fenced) ends
// the session, acks nothing and does not move the position.
func TestEOSFeederFailedCommitAcksNothing(t *testing.T) {
	ctx := context.Background()
	f, prod, tr := newTestFeeder(t, position.Position{}, 1000)
	prod.commitErr = sarama.ErrProducerFenced
	for _, p := range []*pending{row(100, 50), end(100, 110)} {
		if err := f.take(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	err := f.commit()
	if !errors.Is(err, sarama.ErrProducerFenced) {
		t.Fatalf("commit = %v, want the fencing error", err)
	}
	if tr.acks != 0 || !f.done.IsZero() {
		t.Fatalf("a failed commit acked %d events and moved the position to %+v", tr.acks, f.done)
	}
}

// TestEOSFeederSplitsLargeTransaction: a transaction larger than the cut
// commits mid-way with a partial position, then completes.
func TestEOSFeederSplitsLargeTransaction(t *testing.T) {
	ctx := context.Background()
	f, prod, tr := newTestFeeder(t, position.Position{}, 2)
	for _, p := range []*pending{row(500, 100), row(500, 200)} {
		if err := f.take(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := positionOf(t, prod.handed()), (position.Position{FinalLSN: 500, RowLSN: 200}); got != want || tr.acks != 2 {
		t.Fatalf("after the cut: position %+v, %d acks; want %+v, 2", got, tr.acks, want)
	}
	for _, p := range []*pending{row(500, 300), end(500, 510)} {
		if err := f.take(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := positionOf(t, prod.handed()), (position.Position{FinalLSN: 500, EndLSN: 510}); got != want || tr.acks != 3 {
		t.Fatalf("at the end: position %+v, %d acks; want %+v, 3", got, tr.acks, want)
	}
}

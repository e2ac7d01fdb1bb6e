package eos

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/cdc/position"
)

// item is an event of the relay, as these tests make them.
type item struct {
	ev   Event
	msg  *sarama.ProducerMessage // the position record, on one that ends a transaction
	ends bool
}

// items is the relay's side of the seam: it counts the skipped events it
// is asked to ack.
type items struct{ acks int }

func (*items) Of(p *item) Event { return p.ev }

func (*items) Position(msg *sarama.ProducerMessage) *item {
	return &item{msg: msg, ends: true, ev: Event{Size: msg.ByteSize(2)}}
}

func (x *items) Skip(*item) { x.acks++ }

// newTestFeeder is a feeder whose engine input is the returned channel.
func newTestFeeder(t *testing.T, done position.Position, maxHeld int) (*Feeder[*item], chan *item, *items) {
	t.Helper()
	tr := &items{}
	out := make(chan *item, 100)
	f := New(Config{Topic: "positions", Slot: "s", Interval: 1 << 62, MaxHeld: maxHeld, MaxBytes: 1 << 30, Done: done}, nil, Items[*item](tr))
	f.out = out
	return f, out, tr
}

// handed returns what the feeder handed to the engine so far.
func handed(out chan *item) []*item {
	var got []*item
	for {
		select {
		case p := <-out:
			got = append(got, p)
		default:
			return got
		}
	}
}

func row(txn, lsn pglogrepl.LSN) *item { return &item{ev: Event{Txn: txn, LSN: lsn, Size: 10}} }

func end(txn, endLSN pglogrepl.LSN) *item {
	return &item{ev: Event{Marker: true, Txn: txn, End: endLSN}}
}

// positionOf decodes the position record among ps (the last one), which
// must end its transaction.
func positionOf(t *testing.T, ps []*item) position.Position {
	t.Helper()
	last := ps[len(ps)-1]
	if !last.ends || last.msg.Topic != "positions" || string(mustEncode(t, last.msg.Key)) != "s" {
		t.Fatalf("the last record %+v is not the position record of slot s", last)
	}
	slot, p, err := position.Decode(mustEncode(t, last.msg.Value))
	if err != nil || slot != "s" {
		t.Fatalf("position record: %v", err)
	}
	return p
}

func mustEncode(t *testing.T, e sarama.Encoder) []byte {
	t.Helper()
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEOSFeederSkipsAndEndsWithThePosition: events a committed transaction
// holds are acked without being produced; the others go to the engine,
// unacked (the engine acks them once their transaction committed), followed
// by the position record that ends their transaction.
func TestEOSFeederSkipsAndEndsWithThePosition(t *testing.T) {
	ctx := context.Background()
	f, out, tr := newTestFeeder(t, position.Position{FinalLSN: 100, RowLSN: 60}, 1000)
	for _, p := range []*item{row(100, 50), row(100, 60), row(100, 70), end(100, 110), row(200, 150), end(200, 210)} {
		f.take(ctx, p)
	}
	if tr.acks != 2 {
		t.Fatalf("%d acks, want the 2 skipped events only", tr.acks)
	}
	if got := handed(out); len(got) != 2 {
		t.Fatalf("%d records handed over before the commit, want 2", len(got))
	}
	f.commit(ctx)
	got := handed(out)
	if len(got) != 1 || tr.acks != 2 {
		t.Fatalf("after the commit: %d records handed over, %d acks; want the position record alone, 2", len(got), tr.acks)
	}
	if p, want := positionOf(t, got), (position.Position{FinalLSN: 200, EndLSN: 210}); p != want || f.done != want {
		t.Fatalf("position %+v (feeder at %+v), want %+v", p, f.done, want)
	}
	f.commit(ctx)
	if got := handed(out); len(got) != 0 {
		t.Fatalf("a commit with no transaction open handed over %d records", len(got))
	}
}

// TestEOSFeederSplitsLargeTransaction: a transaction larger than the cut
// commits mid-way with a partial position, then completes.
func TestEOSFeederSplitsLargeTransaction(t *testing.T) {
	ctx := context.Background()
	f, out, _ := newTestFeeder(t, position.Position{}, 2)
	for _, p := range []*item{row(500, 100), row(500, 200)} {
		f.take(ctx, p)
	}
	got := handed(out)
	if p, want := positionOf(t, got), (position.Position{FinalLSN: 500, RowLSN: 200}); p != want || len(got) != 3 {
		t.Fatalf("after the cut: position %+v, %d records; want %+v, 3", p, len(got), want)
	}
	for _, p := range []*item{row(500, 300), end(500, 510)} {
		f.take(ctx, p)
	}
	f.commit(ctx)
	got = handed(out)
	if p, want := positionOf(t, got), (position.Position{FinalLSN: 500, EndLSN: 510}); p != want || len(got) != 2 {
		t.Fatalf("at the end: position %+v, %d records; want %+v, 2", p, len(got), want)
	}
}

// TestEOSFeederCommitsOneTransactionAtATime: at a PostgreSQL commit with
// nothing more queued the feeder ends the transaction at once, unless the
// engine still commits the previous one: then the transaction keeps
// growing, and ends at the first boundary after that commit.
func TestEOSFeederCommitsOneTransactionAtATime(t *testing.T) {
	ctx := context.Background()
	f, out, _ := newTestFeeder(t, position.Position{}, 1000)
	f.settled = make(chan struct{}, 1)
	idle := make(chan *item)
	f.take(ctx, row(100, 50))
	f.take(ctx, end(100, 110))
	f.commitIfIdle(ctx, idle)
	if got := handed(out); len(got) != 2 || f.open {
		t.Fatalf("an idle engine: %d records handed over, transaction open %v; want the event and the position, closed", len(got), f.open)
	}
	f.take(ctx, row(200, 150))
	f.take(ctx, end(200, 210))
	f.commitIfIdle(ctx, idle)
	if got := handed(out); len(got) != 1 || !f.open {
		t.Fatalf("while the engine commits: %d records handed over, transaction open %v; want the event alone, open", len(got), f.open)
	}
	f.Committed()
	<-f.settled
	f.commitIfIdle(ctx, idle)
	got := handed(out)
	if p, want := positionOf(t, got), (position.Position{FinalLSN: 200, EndLSN: 210}); p != want || len(got) != 1 {
		t.Fatalf("after the commit: position %+v, %d records; want %+v, 1", p, len(got), want)
	}
}

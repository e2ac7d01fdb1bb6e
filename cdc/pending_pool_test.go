package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// eventCycle is a stream and its producer session, their per-event work
// without a server or a broker: events published go to feed (of room
// window), in an open transaction of a tracker of its own.
func eventCycle(t testing.TB, window int) (*stream, *producerSession, chan *pending) {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry(), "t")
	if err != nil {
		t.Fatal(err)
	}
	tr := ack.New(1<<20, 1<<40)
	feed := make(chan *pending, window)
	s := &stream{cfg: &Config{}, m: m, tr: tr, build: outbox.NewBuilder(""), feed: feed, commitTime: time.Now(), pendings: newPendingPool()}
	tr.Begin()
	return s, &producerSession{m: m, tr: tr}, feed
}

// TestPendingRecycled: in at-least-once mode an acknowledged event's
// pending goes back to the pool, cleared, and the next events built in
// recycled ones carry their own records; a pending still in a send span
// and exactly-once events are never reused.
func TestPendingRecycled(t *testing.T) {
	s, ps, feed := eventCycle(t, 10)
	ctx := context.Background()
	event := func(key, payload string) *outbox.Event {
		return &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: key, EventType: "e", Payload: []byte(payload), JSONChecked: true}
	}
	publish := func(e *outbox.Event) *pending {
		t.Helper()
		if err := s.publish(ctx, e, 1); err != nil {
			t.Fatal(err)
		}
		return <-feed
	}
	for i, tc := range []struct{ key, payload, want string }{
		{"a", `{"n": 1}`, `{"n":1}`}, {"bbbbbbbb", `{"n": 22222222, "s": "x y"}`, `{"n":22222222,"s":"x y"}`}, {"c", `3`, `3`},
	} {
		e := event(tc.key, tc.payload)
		p := publish(e)
		if p.pool == nil {
			t.Fatalf("event %d: not from the pool", i)
		}
		if k, _ := p.msg.Key.Encode(); string(k) != tc.key || p.id != e.ID {
			t.Errorf("event %d: key %q id %v, want %q %v", i, k, p.id, tc.key, e.ID)
		}
		if v, _ := p.msg.Value.Encode(); string(v) != tc.want {
			t.Errorf("event %d: value %q", i, v)
		}
		ps.delivered(p)
		if p.id != uuid.Nil || p.msg != nil {
			t.Errorf("event %d: delivered and not recycled (id %v)", i, p.id)
		}
	}
	inSpan := publish(event("t", `1`))
	inSpan.rec.Trace = "a send span it has not settled in"
	id := inSpan.id
	inSpan.release()
	if inSpan.id != id {
		t.Error("a pending still in a send span was recycled")
	}
	s.cfg.ExactlyOnce = true
	if p := publish(event("x", `1`)); p.pool != nil {
		t.Error("an exactly-once event's pending is from the pool")
	}
}

// TestTracedPendingRecycledKeepsItsSpansKey: a traced event goes back to the
// pool once acked, although its send span ends later (after the idle
// grace); the span reports the key the record had, not what a later event
// built in the same buffers.
func TestTracedPendingRecycledKeepsItsSpansKey(t *testing.T) {
	rec, off := record(t)
	defer off()
	restore := tracing.SetIdleGrace(50 * time.Millisecond)
	defer restore()
	s, ps, feed := eventCycle(t, 10)
	ctx := context.Background()
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "first-key", EventType: "e", Payload: []byte(`1`), JSONChecked: true}
	if err := s.publish(ctx, e, 1); err != nil {
		t.Fatal(err)
	}
	p := <-feed
	if batchOf(p) == nil {
		t.Fatal("the event is not in a send span")
	}
	p.record()
	ps.delivered(p)
	if p.id != uuid.Nil || p.msg != nil {
		t.Fatal("a traced event's pending was not recycled after its ack")
	}
	// A later event built in the same struct and buffers, as the pool hands it out.
	later := &outbox.Event{ID: uuid.New(), AggregateType: "other", AggregateID: "XXXXXXXXX", EventType: "e", Payload: []byte(`2`), JSONChecked: true}
	if err := s.build.Build(&p.rec, later); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the send span's end", func() bool { return len(rec.Ended()) == 1 })
	if got := attrsOf(rec.Ended()[0].Attributes())["messaging.kafka.message.key"]; got != "first-key" {
		t.Errorf("the span reports key %q, want %q", got, "first-key")
	}
}

package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/backoff"
	"github.com/eventforge/eventforge/internal/failpoint"
)

// Retries in place of a record the broker refused with a retriable error:
// after maxProduceAttempts sends the session restarts from the confirmed
// position instead (a new client, new connections).
const (
	maxProduceAttempts = 6
	produceRetryFirst  = 200 * time.Millisecond
	produceRetryMost   = 5 * time.Second
)

// produceResult is the producer's answer for one record: err nil means the
// broker acknowledged it.
type produceResult struct {
	p   *pending
	err error
}

// dispatchHooks are what a dispatcher's user does with records.
type dispatchHooks struct {
	// admit checks a record before it goes to the gate; false means it
	// was settled already (set aside or skipped).
	admit func(ctx context.Context, p *pending) (bool, error)
	// delivered is called once the broker acknowledged p.
	delivered func(p *pending)
	// reject records p (p.reason set) durably, then acks or counts it.
	reject func(ctx context.Context, p *pending) error
	// tooLarge decides on a record the broker refused as too large: the
	// reason to set it aside, or an error that ends the run (the producer
	// batches more than the topic now accepts).
	tooLarge func(ctx context.Context, p *pending, err error) (string, error)
	// failed sees every error the producer hands back.
	failed func(p *pending, err error)
}

// dispatcher hands records to an idempotent async producer through a
// keyGate and settles each result: delivered, retried in place, set aside,
// or the end of the run. One goroutine runs it; the producer's two result
// channels are drained by successes and errors, which forward here.
type dispatcher struct {
	prod    sarama.AsyncProducer
	log     *slog.Logger
	hooks   dispatchHooks
	gate    *keyGate
	results chan produceResult
	retry   chan *pending
	stopped chan struct{} // closed when run returns: forwarding stops
	open    int           // admitted and not yet settled
}

func newDispatcher(prod sarama.AsyncProducer, log *slog.Logger, window int, hooks dispatchHooks) *dispatcher {
	return &dispatcher{
		prod: prod, log: log, hooks: hooks, gate: newKeyGate(),
		results: make(chan produceResult, window+1),
		retry:   make(chan *pending),
		stopped: make(chan struct{}),
	}
}

// run feeds records from in until in closes (and, with untilSettled, every
// admitted record is settled) or ctx ends. Its error ends the session.
func (d *dispatcher) run(ctx context.Context, in <-chan *pending, untilSettled bool) error {
	defer close(d.stopped)
	for {
		var err error
		if in, err = d.pump(ctx, in); err != nil {
			return err
		}
		if in == nil && (!untilSettled || d.open == 0) {
			return nil
		}
		var out chan<- *sarama.ProducerMessage
		var msg *sarama.ProducerMessage
		if next := d.gate.next(); next != nil {
			out, msg = d.prod.Input(), next.msg
		}
		select {
		case p, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			if err := d.admit(ctx, p); err != nil {
				return err
			}
		case out <- msg:
			d.gate.sent()
			failpoint.Hit(failpoint.CDCAfterProduceBeforeAck)
		case r := <-d.results:
			if err := d.settle(ctx, r); err != nil {
				return err
			}
		case p := <-d.retry:
			d.gate.resend(p)
		case <-ctx.Done():
			return nil
		}
	}
}

// pumpBurst bounds the operations of one pump, so run still notices ctx
// and retries while records keep coming.
const pumpBurst = 256

// pump does what needs no waiting: it settles results, admits records and
// hands released records to the producer while each is ready at once. A
// non-blocking operation on one channel costs a fraction of run's select
// over five, and under load most operations find their channel ready, so
// run selects about once per record instead of three times. It returns in,
// or nil once in closed.
func (d *dispatcher) pump(ctx context.Context, in <-chan *pending) (<-chan *pending, error) {
	for range pumpBurst {
		progressed := false
		select {
		case r := <-d.results:
			if err := d.settle(ctx, r); err != nil {
				return in, err
			}
			progressed = true
		default:
		}
		if in != nil {
			select {
			case p, ok := <-in:
				if !ok {
					in = nil
				} else if err := d.admit(ctx, p); err != nil {
					return in, err
				}
				progressed = true
			default:
			}
		}
		if next := d.gate.next(); next != nil {
			select {
			case d.prod.Input() <- next.msg:
				d.gate.sent()
				failpoint.Hit(failpoint.CDCAfterProduceBeforeAck)
				progressed = true
			default:
			}
		}
		if !progressed {
			break
		}
	}
	return in, nil
}

func (d *dispatcher) admit(ctx context.Context, p *pending) error {
	send, err := d.hooks.admit(ctx, p)
	if err != nil || !send {
		return err
	}
	p.key = gateKey(p.msg)
	d.open++
	d.gate.admit(p)
	return nil
}

// gateKey is the ordering key of a record: its topic and record key.
func gateKey(msg *sarama.ProducerMessage) string {
	if msg.Key == nil {
		return msg.Topic
	}
	k, err := msg.Key.Encode()
	if err != nil {
		return msg.Topic
	}
	return msg.Topic + "\x00" + string(k)
}

// settle acts on one result; nothing of p's key is in the producer, so a
// retry or a rejection keeps the key's order.
func (d *dispatcher) settle(ctx context.Context, r produceResult) error {
	p := r.p
	if r.err == nil {
		d.done(p)
		d.hooks.delivered(p)
		return nil
	}
	d.hooks.failed(p, r.err)
	class, err := refusalClass(ctx, p, r.err, d.hooks.tooLarge)
	if err != nil {
		return err
	}
	switch class {
	case produceReject:
		if err := d.hooks.reject(ctx, p); err != nil {
			return err
		}
		d.done(p)
		return nil
	case produceFatal:
		return fatal(fmt.Errorf("produce event %s to %s: %w: %s", p.id, p.msg.Topic, r.err, fatalProduceHint(r.err)))
	}
	p.attempts++
	if p.attempts >= maxProduceAttempts {
		return fmt.Errorf("produce event %s to %s: %w (%d attempts)", p.id, p.msg.Topic, r.err, p.attempts)
	}
	wait := backoff.Exponential(produceRetryFirst, produceRetryMost, p.attempts-1)
	d.log.Warn("publish failed; sending the event again", append(eventAttrs(p), "topic", p.msg.Topic, "error", r.err,
		"attempt", p.attempts, "retry_in", wait)...)
	time.AfterFunc(wait, func() {
		select {
		case d.retry <- p:
		case <-d.stopped:
		}
	})
	return nil
}

func (d *dispatcher) done(p *pending) {
	d.open--
	d.gate.settled(p)
}

func (d *dispatcher) forward(p *pending, err error) {
	select {
	case d.results <- produceResult{p: p, err: err}:
	case <-d.stopped:
	}
}

// successes forwards acknowledged records until the producer closes.
func (d *dispatcher) successes() {
	for msg := range d.prod.Successes() {
		if p, ok := msg.Metadata.(*pending); ok {
			d.forward(p, nil)
		}
	}
}

// errors forwards refused records until the producer closes.
func (d *dispatcher) errors() {
	for pe := range d.prod.Errors() {
		if p, ok := pe.Msg.Metadata.(*pending); ok {
			d.forward(p, pe.Err)
		}
	}
}

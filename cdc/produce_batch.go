package cdc

import "time"

// Catch-up batching. While the relay drains a backlog, the records it hands
// the producer should go out in large requests. The producer sends as soon
// as its connection is free, which is right for live events (no linger, the
// lowest latency) but lets a backlog fragment into small requests when
// events arrive in a trickle: every request then costs the relay, the
// broker and the machine they share far more per event, leaving less for
// the WAL sender, which keeps the trickle going. Records committed longer
// ago than catchUpAge are part of a backlog: they are held back until
// catchUpBatch are ready or the first waited catchUpLinger, then handed over
// together. Live records are never held.
const (
	catchUpAge    = 500 * time.Millisecond
	catchUpBatch  = 512
	catchUpLinger = 5 * time.Millisecond
)

// batcher decides when the dispatcher hands released records to the
// producer. Not safe for concurrent use: the dispatch loop owns it.
type batcher struct {
	linger    time.Duration // catchUpLinger; tests change it
	now       func() time.Time
	since     time.Time // when the records held now became ready; zero: none held
	releasing bool      // hand over everything ready, then hold again
	timer     *time.Timer
}

func newBatcher() *batcher { return &batcher{linger: catchUpLinger, now: time.Now} }

// release reports whether the first ready record, committed at commit, may
// go to the producer now, with ready records released in all. flush
// releases everything (the input ended).
func (b *batcher) release(commit time.Time, ready int, flush bool) bool {
	if b.releasing {
		return true
	}
	if flush || commit.IsZero() || ready >= catchUpBatch {
		return b.startRelease()
	}
	now := b.now()
	if now.Sub(commit) < catchUpAge {
		return b.startRelease() // live
	}
	if b.since.IsZero() {
		b.since = now
	}
	if now.Sub(b.since) >= b.linger {
		return b.startRelease()
	}
	return false
}

func (b *batcher) startRelease() bool {
	b.releasing, b.since = true, time.Time{}
	return true
}

// drained is called when nothing is ready: the next records are held again.
func (b *batcher) drained() { b.releasing, b.since = false, time.Time{} }

// wake is a channel that fires when the records held now are due, or nil
// when none are held.
func (b *batcher) wake() <-chan time.Time {
	if b.since.IsZero() {
		return nil
	}
	wait := b.linger - b.now().Sub(b.since)
	if b.timer == nil {
		b.timer = time.NewTimer(wait)
	} else {
		b.timer.Reset(wait)
	}
	return b.timer.C
}

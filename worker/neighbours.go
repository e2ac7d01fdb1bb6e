package worker

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// An event whose retries are spent is dead-lettered only when it fails
// alone. The events behind it in its partition tell: the Runner tries the
// next ones of other aggregates (their outcome does not hang on the failing
// event) in transactions it rolls back. When as many consecutive distinct
// events as Config.OutageEvents (the failing one and the events
// dead-lettered just before it included) fail with the same cause while the
// database works, the cause is not the event's: a service the handler
// needs is down, a privilege was revoked. The partition then waits with
// backoff, spending no attempts, and dead-letters nothing until an event
// behind it succeeds while it still fails.

// deadStreak counts the consecutive events of a partition dead-lettered for
// one cause; an applied event ends it.
type deadStreak struct {
	cause string
	n     int
}

func (d *deadStreak) add(err error) {
	if c := causeOf(err); c == d.cause {
		d.n++
	} else {
		d.cause, d.n = c, 1
	}
}

// alone reports whether ev's failure err is its own: fewer than OutageEvents
// consecutive distinct events fail with err's cause, counting the events
// dead-lettered just before ev and the ones behind it, tried in a
// transaction that is rolled back. An event behind it that succeeds, or
// fails otherwise, makes ev poison; so does a partition with too few
// events behind it to tell.
func (p *partitionWorker) alone(ctx context.Context, ev Event, err error) bool {
	need := p.r.cfg.OutageEvents - 1 // other events that must fail the same way
	if p.dead.cause == causeOf(err) {
		need -= p.dead.n
	}
	if need <= 0 {
		return false
	}
	verdict := true
	p.eachNeighbour(ev, func(nb Event) bool {
		dup, nerr := p.dryRun(ctx, nb)
		switch {
		case dup:
			return true // already applied: tells nothing
		case nerr == nil || !sameCause(nerr, err):
			return false
		}
		need--
		verdict = need > 0
		return verdict
	})
	return verdict
}

// eachNeighbour calls f with the well-formed events behind ev of other
// aggregates, in offset order, until f returns false or none is left. It
// looks at the rest of the batch, then at the messages already waiting in
// the claim (taking up to BatchSize of them, which are processed next), and
// never waits for more.
func (p *partitionWorker) eachNeighbour(ev Event, f func(Event) bool) {
	seen := map[uuid.UUID]bool{ev.ID: true}
	visit := func(m *sarama.ConsumerMessage) bool {
		if m.Offset <= ev.Offset {
			return true
		}
		nb, err := decode(m)
		if err != nil || nb.AggregateID == ev.AggregateID || seen[nb.ID] {
			return true
		}
		seen[nb.ID] = true
		return f(nb)
	}
	for _, m := range p.batch {
		if !visit(m) {
			return
		}
	}
	for _, m := range p.ahead {
		if !visit(m) {
			return
		}
	}
	for len(p.ahead) < p.r.cfg.BatchSize {
		m := receive(p.in)
		if m == nil {
			return
		}
		p.ahead = append(p.ahead, m)
		if !visit(m) {
			return
		}
	}
}

// dryRun applies ev in a transaction it rolls back, to learn whether it
// would fail; dup reports an event already in the inbox.
func (p *partitionWorker) dryRun(ctx context.Context, ev Event) (dup bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.r.cfg.ApplyTimeout)
	defer cancel()
	tx, fresh, err := beginInbox(ctx, p.r.db, p.r.cfg.Consumer, ev)
	if err != nil {
		return false, err
	}
	defer rollback(ctx, tx)
	if !fresh {
		return true, nil
	}
	_, err = run(ctx, tx, p.r.handler, ev)
	return false, err
}

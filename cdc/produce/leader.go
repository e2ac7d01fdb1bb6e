package produce

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// DefaultLeaderWait is how long, after a partition's leader left a request
// unanswered, the engine looks for another leader before it sends to the
// silent broker again: about what Kafka takes to fence a silent broker
// (broker.session.timeout.ms, 9 s by default) and elect new leaders, from
// the request timeout after the freeze.
const DefaultLeaderWait = 15 * time.Second

// leaderPollMost caps the wait between two lookups of a silent leader's
// partition.
const leaderPollMost = 250 * time.Millisecond

// retried is a partition handed back to Run by retryAfter; moved when a
// broker named a leader other than the one that failed.
type retried struct {
	p     *partition
	moved bool
}

// retryAfter hands p back to Run after wait, once a broker other than
// failed (the one its generation went to) has named the partition's
// leader (kafka.LeaderLookup: its own metadata requests, never the
// client's refresh, which may wait on the frozen broker while holding the
// client's lock): its generation goes there (leaderOf), and so do the
// other partitions of the topic. When failed left the request
// unanswered (silent: frozen, or gone), the engine asks again, every
// poll, until another broker is named or LeaderWait has passed since the
// failure, instead of sending to failed again: a frozen broker holds every
// request for a request timeout, and a new connection to it for three.
// It ends when Run does; Wait waits for it.
func (e *Engine[T]) retryAfter(p *partition, wait time.Duration, failed int32, silent bool) {
	defer e.wg.Done()
	key, since, moved := p.partKey, time.Now(), false
	for n := 0; ; n++ {
		if !e.sleep(wait) {
			return
		}
		id, err := e.leaders.Leader(key.topic, key.partition, failed)
		if moved = err == nil && id != failed && failed != kafka.NoBroker; moved {
			e.log.Info("another broker leads the partition now; sending its records there", "topic", key.topic,
				"partition", key.partition, "from", failed, "to", id, "after", time.Since(since).Round(time.Millisecond))
		}
		if !silent || (err == nil && id != failed) || time.Since(since) >= e.cfg.LeaderWait {
			break
		}
		wait = backoff.Exponential(e.cfg.RetryFirst, min(e.cfg.RetryMost, leaderPollMost), n)
	}
	select {
	case e.retry <- retried{p: p, moved: moved}:
	case <-e.stopped:
	}
}

// sleep waits d; false when Run ended meanwhile.
func (e *Engine[T]) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.stopped:
		return false
	}
}

// leaderOf is the broker to send p's generation to: the one the latest
// lookup about its topic named, while the client knows it, else the
// client's cached leader.
func (e *Engine[T]) leaderOf(p *partition) (*sarama.Broker, error) {
	if id, _, ok := e.leaders.Latest(p.topic, p.partition); ok {
		if b, err := e.cluster.Broker(id); err == nil {
			return b, nil
		}
	}
	return e.cluster.Leader(p.topic, p.partition)
}

package produce

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
)

// DefaultLeaderWait is how long, after a partition's leader left a request
// unanswered, the engine looks for another leader before it sends to the
// silent broker again: about what Kafka takes to fence a silent broker
// (broker.session.timeout.ms, 9 s by default) and elect new leaders, from
// the request timeout after the freeze.
const DefaultLeaderWait = 15 * time.Second

// leaderPollMost caps the wait between two lookups of a silent leader's
// partition; leaderAnswerAge is how long one answer about a topic serves
// every partition that asks, so many partitions of a silent broker cost one
// metadata request per topic and poll.
const (
	leaderPollMost  = 500 * time.Millisecond
	leaderAnswerAge = 200 * time.Millisecond
)

// noBroker is a broker id that names none.
const noBroker int32 = -1

// leaderLookup finds a partition's leader on the engine's own metadata
// requests, sent to brokers other than the one that just failed. The
// client's own refresh goes to the broker with the fewest requests in
// flight, which may be the frozen one, and first waits for each broker's
// connection to be free: one waiting on a frozen broker holds it for a
// request timeout, its handshake twice that. Its latest answer about a
// topic decides where every partition of the topic is sent, until the next
// one (the client's cache is not refreshed: its refresh may wait on the
// frozen broker while holding the client's lock).
type leaderLookup struct {
	cluster Cluster
	version sarama.KafkaVersion

	asking  sync.Mutex // one ask at a time
	mu      sync.Mutex // guards answers
	answers map[string]topicLeaders
}

// topicLeaders is one metadata answer about a topic: each partition's
// leader, when it has one.
type topicLeaders struct {
	at      time.Time
	leaders map[int32]int32
}

// errNoLeaderNamed is a lookup that found no broker to answer, or an
// answer without a leader for the partition.
var errNoLeaderNamed = errors.New("no broker named the partition's leader")

// leader is key's leader as named by a broker other than avoid (by avoid
// itself only when no other broker is known), from an answer at most
// leaderAnswerAge old.
func (l *leaderLookup) leader(key partKey, avoid int32) (int32, error) {
	l.asking.Lock()
	defer l.asking.Unlock()
	if _, fresh := l.latest(key, leaderAnswerAge); !fresh {
		leaders, err := l.ask(key.topic, avoid)
		if err != nil {
			return noBroker, err
		}
		l.mu.Lock()
		l.answers[key.topic] = topicLeaders{at: time.Now(), leaders: leaders}
		l.mu.Unlock()
	}
	id, _ := l.latest(key, leaderAnswerAge)
	if id == noBroker {
		return noBroker, fmt.Errorf("%s/%d: %w", key.topic, key.partition, errNoLeaderNamed)
	}
	return id, nil
}

// latest is key's leader in the latest answer about its topic (noBroker
// when none names one), and whether that answer is at most maxAge old.
func (l *leaderLookup) latest(key partKey, maxAge time.Duration) (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.answers[key.topic]
	if !ok {
		return noBroker, false
	}
	id, named := a.leaders[key.partition]
	if !named {
		id = noBroker
	}
	return id, time.Since(a.at) <= maxAge
}

// ask asks the brokers but avoid, one after the other in id order, for
// topic's leaders; the first answer counts.
func (l *leaderLookup) ask(topic string, avoid int32) (map[int32]int32, error) {
	var ids []int32
	for _, b := range l.cluster.Brokers() {
		if b.ID() != avoid {
			ids = append(ids, b.ID())
		}
	}
	slices.Sort(ids)
	errs := []error{errNoLeaderNamed}
	for _, id := range ids {
		b, err := l.cluster.Broker(id) // opened when it was not
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := b.GetMetadata(sarama.NewMetadataRequest(l.version, []string{topic}))
		if err != nil {
			_ = b.Close() // as a sender does: a timed-out connection stays failed
			errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
			continue
		}
		if leaders := leadersOf(resp, topic); len(leaders) > 0 {
			return leaders, nil
		}
	}
	return nil, errors.Join(errs...)
}

// leadersOf is the leader of each of topic's partitions that has one in
// resp.
func leadersOf(resp *sarama.MetadataResponse, topic string) map[int32]int32 {
	out := map[int32]int32{}
	for _, t := range resp.Topics {
		if t.Name != topic || !errors.Is(t.Err, sarama.ErrNoError) {
			continue
		}
		for _, p := range t.Partitions {
			if errors.Is(p.Err, sarama.ErrNoError) && p.Leader >= 0 {
				out[p.ID] = p.Leader
			}
		}
	}
	return out
}

// retryAfter hands p back to Run after wait, once a broker other than
// failed (the one its generation went to) has named the partition's
// leader: its generation goes there (leaderOf). When failed left the request
// unanswered (silent: frozen, or gone), the engine asks again, every
// poll, until another broker is named or LeaderWait has passed since the
// failure, instead of sending to failed again: a frozen broker holds every
// request for a request timeout, and a new connection to it for three.
// It ends when Run does; Wait waits for it.
func (e *Engine[T]) retryAfter(p *partition, wait time.Duration, failed int32, silent bool) {
	defer e.wg.Done()
	key, since := p.partKey, time.Now()
	for n := 0; ; n++ {
		if !e.sleep(wait) {
			return
		}
		id, err := e.leaders.leader(key, failed)
		if !silent || (err == nil && id != failed) || time.Since(since) >= e.cfg.LeaderWait {
			break
		}
		wait = backoff.Exponential(e.cfg.RetryFirst, min(e.cfg.RetryMost, leaderPollMost), n)
	}
	select {
	case e.retry <- p:
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
// lookup named, while the client knows it, else the client's cached leader.
func (e *Engine[T]) leaderOf(p *partition) (*sarama.Broker, error) {
	if id, _ := e.leaders.latest(p.partKey, 0); id != noBroker {
		if b, err := e.cluster.Broker(id); err == nil {
			return b, nil
		}
	}
	return e.cluster.Leader(p.topic, p.partition)
}

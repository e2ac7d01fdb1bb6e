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

// leaderLookup finds a partition's leader on metadata requests of its
// own, sent to brokers other than the one that just failed, each on a
// connection opened for it (never behind the produce requests of the
// client's connection, which wait for the in-sync replicas). The client's
// own refresh goes to the broker with the fewest requests in flight, which
// may be the frozen one, and first waits for each broker's connection to be
// free: one busy with a frozen broker holds it for a request timeout, a new
// connection's handshake for twice that. Its latest answer about a topic
// decides where every partition of the topic is sent, until the next one
// (the client's cache is not refreshed: its refresh may wait on the frozen
// broker while holding the client's lock).
type leaderLookup struct {
	cluster Cluster
	version sarama.KafkaVersion

	asking sync.Mutex          // one ask at a time; guards failed
	failed map[int32]time.Time // when a broker last left a lookup unanswered

	mu      sync.Mutex // guards answers
	answers map[string]topicLeaders
}

// failedRecently is how long a broker that left a lookup unanswered is
// asked after the others.
const failedRecently = time.Minute

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

// ask asks the brokers but avoid, one after the other, for topic's
// leaders; the first answer counts. Brokers that failed a lookup recently
// are asked last, each broker in id order.
func (l *leaderLookup) ask(topic string, avoid int32) (map[int32]int32, error) {
	var brokers []*sarama.Broker
	for _, b := range l.cluster.Brokers() {
		if b.ID() != avoid {
			brokers = append(brokers, b)
		}
	}
	late := func(b *sarama.Broker) bool { return time.Since(l.failed[b.ID()]) < failedRecently }
	slices.SortFunc(brokers, func(a, b *sarama.Broker) int {
		if la, lb := late(a), late(b); la != lb {
			if la {
				return 1
			}
			return -1
		}
		return int(a.ID()) - int(b.ID())
	})
	errs := []error{errNoLeaderNamed}
	for _, b := range brokers {
		leaders, err := l.askOne(b.ID(), b.Addr(), topic)
		if err != nil {
			l.failed[b.ID()] = time.Now()
			errs = append(errs, fmt.Errorf("broker %d: %w", b.ID(), err))
			continue
		}
		delete(l.failed, b.ID())
		if len(leaders) > 0 {
			return leaders, nil
		}
	}
	return nil, errors.Join(errs...)
}

// askOne asks the broker at addr for topic's leaders on a connection of
// its own, closed before it returns.
func (l *leaderLookup) askOne(id int32, addr, topic string) (map[int32]int32, error) {
	b := sarama.NewBroker(addr)
	if err := b.Open(l.cluster.Config()); err != nil {
		return nil, err
	}
	defer func() { _ = b.Close() }()
	resp, err := b.GetMetadata(sarama.NewMetadataRequest(l.version, []string{topic}))
	if err != nil {
		return nil, err
	}
	return leadersOf(resp, topic), nil
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
		if err == nil && id != failed && failed != noBroker {
			e.log.Info("another broker leads the partition now; sending its records there", "topic", key.topic,
				"partition", key.partition, "from", failed, "to", id, "after", time.Since(since).Round(time.Millisecond))
		}
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

package kafka

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// NoBroker is a broker id that names none.
const NoBroker int32 = -1

// ErrNoLeaderNamed is a lookup that no broker answered, or whose answer
// names no leader for the partition.
var ErrNoLeaderNamed = errors.New("no broker named the partition's leader")

// leaderAnswerAge is how long one answer about a topic serves every
// partition that asks, so many partitions of a lost broker cost one
// metadata request per topic and poll.
const leaderAnswerAge = 200 * time.Millisecond

// failedRecently is how long a broker that left a lookup unanswered is
// asked after the others.
const failedRecently = time.Minute

// Cluster is what a LeaderLookup needs of a sarama.Client: the brokers it
// knows and its configuration (security, timeouts, version).
type Cluster interface {
	Brokers() []*sarama.Broker
	Config() *sarama.Config
}

// LeaderLookup finds partitions' leaders on metadata requests of its own,
// each on a connection opened for it and closed after it, so it never
// waits behind a client's other requests on a shared connection. A client's
// own refresh (sarama's RefreshMetadata) goes to the broker with the fewest
// requests in flight, which may be a frozen one, and first waits for every
// broker's connection to be free: one busy with a frozen broker holds it
// for a request timeout, a new connection's handshake for twice that, and
// the client's lock meanwhile. A lookup asks the brokers one after the
// other, those that left one unanswered in the last minute last, and takes
// the first answer. Safe for concurrent use; one lookup at a time.
type LeaderLookup struct {
	cluster Cluster

	asking sync.Mutex          // one ask at a time; guards failed
	failed map[int32]time.Time // when a broker last left a lookup unanswered

	mu      sync.Mutex // guards answers and alive
	answers map[string]topicAnswer
	alive   map[int32]*liveness
}

// topicAnswer is one metadata answer about a topic.
type topicAnswer struct {
	at         time.Time
	partitions int                       // in the answer, with or without a leader
	leaders    map[int32]partitionLeader // of the partitions that have one
}

type partitionLeader struct{ id, epoch int32 }

// NewLeaderLookup returns a lookup of cluster's brokers.
func NewLeaderLookup(cluster Cluster) *LeaderLookup {
	return &LeaderLookup{cluster: cluster, failed: map[int32]time.Time{}, answers: map[string]topicAnswer{}}
}

// Leader is the leader of topic's partition as named by a broker other
// than avoid (NoBroker: any), from an answer at most 200 ms old: a new
// one is asked for when the latest is older.
func (l *LeaderLookup) Leader(topic string, partition, avoid int32) (int32, error) {
	if err := l.refresh(topic, avoid); err != nil {
		return NoBroker, err
	}
	id, _, ok := l.Latest(topic, partition)
	if !ok {
		return NoBroker, fmt.Errorf("%s/%d: %w", topic, partition, ErrNoLeaderNamed)
	}
	return id, nil
}

// Refresh asks for topic's leaders unless the latest answer is at most
// 200 ms old, and returns the number of partitions the answer has.
func (l *LeaderLookup) Refresh(topic string) (int, error) {
	if err := l.refresh(topic, NoBroker); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers[topic].partitions, nil
}

func (l *LeaderLookup) refresh(topic string, avoid int32) error {
	l.asking.Lock()
	defer l.asking.Unlock()
	l.mu.Lock()
	a, ok := l.answers[topic]
	l.mu.Unlock()
	if ok && time.Since(a.at) <= leaderAnswerAge {
		return nil
	}
	a, err := l.ask(topic, avoid)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.answers[topic] = a
	l.mu.Unlock()
	return nil
}

// Latest is the leader and leader epoch of topic's partition in the latest
// answer about topic, if it names one.
func (l *LeaderLookup) Latest(topic string, partition int32) (id, epoch int32, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.answers[topic].leaders[partition]
	if !ok {
		return NoBroker, -1, false
	}
	return p.id, p.epoch, true
}

// ask asks the brokers but avoid, one after the other, for topic's
// leaders; the first answer naming any counts. The caller holds asking.
func (l *LeaderLookup) ask(topic string, avoid int32) (topicAnswer, error) {
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
	errs := []error{ErrNoLeaderNamed}
	for _, b := range brokers {
		a, err := l.askOne(b.Addr(), topic)
		if err != nil {
			l.failed[b.ID()] = time.Now()
			errs = append(errs, fmt.Errorf("broker %d: %w", b.ID(), err))
			continue
		}
		delete(l.failed, b.ID())
		if len(a.leaders) > 0 {
			return a, nil
		}
	}
	return topicAnswer{}, errors.Join(errs...)
}

// askOne asks the broker at addr for topic's leaders on a connection of
// its own, closed before it returns, with answerTimeout's deadlines: a
// frozen broker costs three of them (the version handshake, tried twice,
// then the request), not three request timeouts.
func (l *LeaderLookup) askOne(addr, topic string) (topicAnswer, error) {
	conf := l.shortConfig(true)
	b := sarama.NewBroker(addr)
	if err := b.Open(conf); err != nil {
		return topicAnswer{}, err
	}
	defer func() { _ = b.Close() }()
	resp, err := b.GetMetadata(sarama.NewMetadataRequest(conf.Version, []string{topic}))
	if err != nil {
		return topicAnswer{}, err
	}
	a := topicAnswer{at: time.Now(), leaders: map[int32]partitionLeader{}}
	for _, t := range resp.Topics {
		if t.Name != topic || !errors.Is(t.Err, sarama.ErrNoError) {
			continue
		}
		a.partitions = len(t.Partitions)
		for _, p := range t.Partitions {
			if errors.Is(p.Err, sarama.ErrNoError) && p.Leader >= 0 {
				a.leaders[p.ID] = partitionLeader{id: p.Leader, epoch: p.LeaderEpoch}
			}
		}
	}
	return a, nil
}

// answerTimeout bounds each wait of a lookup or of Answers on a broker
// (at most the client's request timeout): a live broker answers a
// metadata or version request in milliseconds. answerAge is how long a
// result of Answers serves.
const (
	answerTimeout = time.Second
	answerAge     = time.Second
)

// Answers reports whether b answers a request on a connection of its own
// within a second (at most the client's request timeout): a frozen broker,
// which the metadata still names leader until Kafka fences it, does not.
// The result serves for a second; concurrent calls about one broker share
// one request.
func (l *LeaderLookup) Answers(b *sarama.Broker) bool {
	l.mu.Lock()
	if l.alive == nil {
		l.alive = map[int32]*liveness{}
	}
	lv := l.alive[b.ID()]
	if lv == nil {
		lv = &liveness{}
		l.alive[b.ID()] = lv
	}
	l.mu.Unlock()
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if time.Since(lv.at) > answerAge {
		lv.ok, lv.at = l.ping(b.Addr()) == nil, time.Now()
	}
	return lv.ok
}

// liveness is the latest result of Answers about one broker.
type liveness struct {
	mu sync.Mutex
	at time.Time
	ok bool
}

// ping sends an ApiVersions request (no handshake before it) to addr on a
// connection of its own with answerTimeout's deadlines.
func (l *LeaderLookup) ping(addr string) error {
	b := sarama.NewBroker(addr)
	if err := b.Open(l.shortConfig(false)); err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	_, err := b.ApiVersions(&sarama.ApiVersionsRequest{})
	return err
}

// shortConfig is the client's configuration with answerTimeout's
// deadlines, and the version handshake on a new connection or not.
func (l *LeaderLookup) shortConfig(handshake bool) *sarama.Config {
	conf := *l.cluster.Config()
	limit := min(answerTimeout, conf.Net.ReadTimeout)
	conf.Net.DialTimeout, conf.Net.ReadTimeout, conf.Net.WriteTimeout = limit, limit, limit
	conf.ApiVersionsRequest = conf.ApiVersionsRequest && handshake
	return &conf
}

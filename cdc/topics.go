package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/outbox"
)

// batchOverhead is kept free below a topic's max.message.bytes: the broker
// checks whole record batches against it, and a batch adds a header of 61
// bytes to its records (rounded up for safety).
const batchOverhead = 128

// limits remembers, across sessions, the record size each topic accepts and
// which topics had their durability checked. The producer batches every
// topic up to one MaxMessageBytes, so the relay uses the smallest limit it
// knows as its record limit.
type limits struct {
	mu      sync.Mutex
	max     int             // --max-message-bytes
	byTopic map[string]int  // max.message.bytes - batchOverhead
	checked map[string]bool // topics whose durability was checked
	log     *slog.Logger    // for the durability warnings
}

func newLimits(max int) *limits {
	return &limits{max: max, byTopic: map[string]int{},
		checked: map[string]bool{}, log: slog.New(slog.DiscardHandler)}
}

// firstUse reports whether topic is used for the first time by this relay,
// and marks it used.
func (l *limits) firstUse(topic string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.checked[topic] {
		return false
	}
	l.checked[topic] = true
	return true
}

// current is the record limit for a new producer.
func (l *limits) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.max
	for _, v := range l.byTopic {
		m = min(m, v)
	}
	return m
}

func (l *limits) set(topic string, v int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byTopic[topic] = v
}

// topics makes sure the topics a session writes to exist, and learns their
// size limits.
type topics struct {
	cfg     *Config
	client  sarama.Client
	admin   sarama.ClusterAdmin
	limits  *limits
	ensured map[string]bool
	missing map[string]bool // waited for in this session and still missing
	wait    time.Duration   // bound on waiting for a missing topic to appear
}

func newTopics(cfg *Config, client sarama.Client, lim *limits) (*topics, error) {
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("open Kafka admin client: %w", err)
	}
	// Closing the admin would close the shared client; the session closes
	// the client itself.
	return &topics{cfg: cfg, client: client, admin: admin, limits: lim,
		ensured: map[string]bool{}, missing: map[string]bool{}, wait: missingTopicWait}, nil
}

// ensure creates topic when missing and records its limit. A topic that no
// event may go to (an invalid, internal or reserved name, one outside
// AllowedTopics, or a missing one when creation is disabled) yields a
// *RejectError: the event is set aside, the
// relay goes on. Not safe for concurrent use.
func (t *topics) ensure(ctx context.Context, topic string) error {
	if t.ensured[topic] {
		return nil
	}
	if problem := t.cfg.topicRefusal(topic); problem != "" {
		return &RejectError{Reason: problem}
	}
	if err := t.exist(ctx, topic); err != nil {
		return err
	}
	conf, err := t.topicConfig(topic)
	if err != nil {
		return err
	}
	t.limits.set(topic, conf.maxMessageBytes-batchOverhead)
	if t.limits.firstUse(topic) {
		conf.replicationFactor = t.replicationFactor(topic)
		if w := durabilityWarning(topic, conf, len(t.client.Brokers())); w != "" {
			t.limits.log.Warn(w)
		}
	}
	t.ensured[topic] = true
	return nil
}

func (t *topics) exist(ctx context.Context, topic string) error {
	found, err := t.describe(topic)
	if err != nil || found {
		return err
	}
	if !t.cfg.CreateTopics {
		return t.awaitMissing(ctx, topic)
	}
	err = t.admin.CreateTopic(topic, topicDetail(t.cfg), false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		if errors.Is(err, sarama.ErrInvalidTopic) || errors.Is(err, sarama.ErrPolicyViolation) {
			// The broker refuses this name (or its policy does): only
			// this topic's events are affected.
			return &RejectError{Reason: fmt.Sprintf("the broker refused to create topic %q: %v", topic, err)}
		}
		if errors.Is(err, sarama.ErrInvalidReplicationFactor) || errors.Is(err, sarama.ErrInvalidPartitions) {
			return fatal(fmt.Errorf("create topic %s: %w", topic, err))
		}
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return t.awaitLeaders(ctx, topic)
}

// awaitLeaders waits until a topic just created has a leader for every
// partition in the client's metadata.
func (t *topics) awaitLeaders(ctx context.Context, topic string) error {
	// The metadata of a new topic reaches every broker shortly after. Ask
	// the cluster once per poll until every partition has a leader: the
	// client's own refresh retries leaderless partitions with backoff (about
	// 20 s), stalling the stream on the first event of every new topic.
	for i := 0; ; i++ {
		if t.leadersElected(topic) {
			if err := t.client.RefreshMetadata(topic); err == nil {
				if ps, err := t.client.Partitions(topic); err == nil && len(ps) > 0 {
					return nil
				}
			}
		}
		if i == 100 {
			return fmt.Errorf("topic %s created but not visible in metadata", topic)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leadersElected reports whether the cluster's metadata shows topic with a
// leader for every partition.
func (t *topics) leadersElected(topic string) bool {
	md, err := t.admin.DescribeTopics([]string{topic})
	if err != nil {
		return false
	}
	for _, m := range md {
		if m.Name != topic || !errors.Is(m.Err, sarama.ErrNoError) || len(m.Partitions) == 0 {
			continue
		}
		for _, p := range m.Partitions {
			if p.Leader < 0 || !errors.Is(p.Err, sarama.ErrNoError) {
				return false
			}
		}
		return true
	}
	return false
}

// topicDetail is how the relay creates a topic: the configured partitions,
// the configured replication factor (-1: the broker's default, which needs
// Kafka 2.4 or later) and, when set, min.insync.replicas.
func topicDetail(cfg *Config) *sarama.TopicDetail {
	d := &sarama.TopicDetail{NumPartitions: cfg.TopicPartitions, ReplicationFactor: cfg.TopicReplicationFactor}
	if cfg.TopicMinInsyncReplicas > 0 {
		v := strconv.Itoa(cfg.TopicMinInsyncReplicas)
		d.ConfigEntries = map[string]*string{"min.insync.replicas": &v}
	}
	return d
}

// topicConf is what the relay reads of a topic's configuration.
type topicConf struct {
	maxMessageBytes   int
	minInsyncReplicas int
	replicationFactor int  // fewest replicas of a partition; 0: unknown
	uncleanElection   bool // unclean.leader.election.enable
}

// Topic configuration entries the relay reads.
const (
	confMaxMessageBytes   = "max.message.bytes"
	confMinInsyncReplicas = "min.insync.replicas"
	confUncleanElection   = "unclean.leader.election.enable"
)

func (t *topics) topicConfig(topic string) (topicConf, error) {
	var c topicConf
	entries, err := kafka.DescribeConfig(t.admin, sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{confMaxMessageBytes, confMinInsyncReplicas, confUncleanElection},
	})
	if err != nil {
		return c, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	found := map[string]bool{}
	for _, e := range entries {
		var dst *int
		switch e.Name {
		case confMaxMessageBytes:
			dst = &c.maxMessageBytes
		case confMinInsyncReplicas:
			dst = &c.minInsyncReplicas
		case confUncleanElection:
			c.uncleanElection = e.Value == "true"
			continue
		default:
			continue
		}
		v, err := strconv.Atoi(e.Value)
		if err != nil {
			return c, fmt.Errorf("topic %s: %s %q: %w", topic, e.Name, e.Value, err)
		}
		*dst, found[e.Name] = v, true
	}
	if !found[confMaxMessageBytes] {
		return c, fmt.Errorf("describe topic %s: no max.message.bytes", topic)
	}
	if !found[confMinInsyncReplicas] {
		c.minInsyncReplicas = 1 // Kafka's default
	}
	return c, nil
}

// durabilityWarning is the one-line warning for a topic whose settings let
// a record the brokers acknowledged be lost with a single broker, although
// the cluster has brokers enough to keep it: a replication factor of 1,
// min.insync.replicas 1 (on 3 brokers or more: with 2, requiring both would
// stop every write while one is down), or unclean leader election (an
// out-of-sync replica may become leader and truncate acknowledged records).
// The slot is confirmed past an acknowledged event, so nothing would send it
// again. "" when there is nothing to say.
func durabilityWarning(topic string, c topicConf, brokers int) string {
	if brokers < 2 {
		return ""
	}
	var problems []string
	if c.replicationFactor == 1 {
		problems = append(problems, "replication factor 1 (recreate the topic with 3 replicas, or set --topic-replication-factor for topics the relay creates)")
	}
	if c.minInsyncReplicas < 2 && brokers >= 3 && c.replicationFactor != 1 {
		problems = append(problems, fmt.Sprintf("min.insync.replicas=%d (set min.insync.replicas=2 on the topic, or --topic-min-insync-replicas for topics the relay creates)", c.minInsyncReplicas))
	}
	if c.uncleanElection {
		problems = append(problems, "unclean.leader.election.enable=true (set it to false)")
	}
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprintf("topic %s may lose acknowledged events with a single broker on a cluster of %d brokers: %s",
		topic, brokers, strings.Join(problems, "; "))
}

// replicationFactor is the fewest replicas of any partition of topic, 0
// when the cluster does not say.
func (t *topics) replicationFactor(topic string) int {
	md, err := t.admin.DescribeTopics([]string{topic})
	if err != nil {
		return 0
	}
	rf := 0
	for _, m := range md {
		if m.Name != topic {
			continue
		}
		for _, p := range m.Partitions {
			if rf == 0 || len(p.Replicas) < rf {
				rf = len(p.Replicas)
			}
		}
	}
	return rf
}

// missingTopicWait bounds how long the first event of a session that goes to
// a missing topic waits for it to appear when creation is disabled: an
// operator may be creating it right now.
const missingTopicWait = 5 * time.Second

// awaitMissing waits, bounded, for a topic the relay may not create; the
// event is then set aside with ErrTopicMissing as its reason. Later events
// of the session look once more without waiting, so a topic created since
// is used at once.
func (t *topics) awaitMissing(ctx context.Context, topic string) error {
	deadline := time.Now().Add(t.wait)
	if t.missing[topic] {
		deadline = time.Now()
	}
	for {
		found, err := t.describe(topic)
		if err != nil {
			return err
		}
		if found {
			delete(t.missing, topic)
			return nil
		}
		if !time.Now().Before(deadline) {
			t.missing[topic] = true
			return &RejectError{Reason: fmt.Sprintf("%s: topic %q (--create-topics is false): create it, then republish the event", ErrTopicMissing, topic)}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// describe asks the cluster once whether topic exists. Unlike the client's
// metadata refresh, it does not retry for a topic the broker does not know:
// that retry loop would stall the stream for many seconds per missing topic.
func (t *topics) describe(topic string) (bool, error) {
	md, err := t.admin.DescribeTopics([]string{topic})
	if err != nil {
		return false, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	for _, m := range md {
		if m.Name != topic {
			continue
		}
		switch {
		case errors.Is(m.Err, sarama.ErrNoError):
			return len(m.Partitions) > 0, nil
		case errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition):
			return false, nil
		case errors.Is(m.Err, sarama.ErrInvalidTopic):
			return false, &RejectError{Reason: fmt.Sprintf("the broker calls topic %q invalid", truncateName(topic))}
		default:
			return false, fmt.Errorf("describe topic %s: %w", topic, m.Err)
		}
	}
	return false, nil
}

// truncateName keeps reasons short when a hostile name is long.
func truncateName(s string) string { return outbox.TruncateName(s) }

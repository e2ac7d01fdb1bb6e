// Package topics makes sure the topics a relay session writes to exist and
// learns what they accept: it creates a missing topic (or waits, bounded,
// for one it may not create), waits for its leaders, reads its
// max.message.bytes, and warns once about settings that can lose
// acknowledged records. A topic no event may go to yields a
// *setaside.RejectError: that event is set aside, the relay goes on.
//
// Imports (floor: library, the relay's own): cdc/setaside, internal/shared/kafka,
// internal/shared/outbox and sarama.
package topics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventforge/eventforge/cdc/setaside"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Settings is how the relay creates and polices topics.
type Settings struct {
	// Create lets the relay create a missing topic (--create-topics).
	Create bool
	// Partitions and ReplicationFactor of a created topic; -1 replicas:
	// the broker's default.replication.factor.
	Partitions        int32
	ReplicationFactor int16
	// MinInsyncReplicas of a created topic; 0: the broker's default.
	MinInsyncReplicas int
	// Refusal says why no event may go to topic, or "" when one may; nil:
	// every topic may be used.
	Refusal func(topic string) string
}

// ErrMissing is the reason of an event whose topic does not exist and may
// not be created.
var ErrMissing = errors.New("topic does not exist")

// ErrSettings marks a topic the broker refused to create with the
// configured settings (replication factor, partitions): every topic would
// fail the same way, so the relay stops.
var ErrSettings = errors.New("topic settings refused")

// BatchOverhead is kept free below a topic's max.message.bytes: the broker
// checks whole record batches against it, and a batch adds a header of 61
// bytes to its records (rounded up for safety).
const BatchOverhead = 128

// Limits remembers, across sessions, the record size each topic accepts and
// which topics had their durability checked. The producer batches every
// topic up to one MaxMessageBytes, so the relay uses the smallest limit it
// knows as its record limit.
type Limits struct {
	mu      sync.Mutex
	max     int             // --max-message-bytes
	byTopic map[string]int  // max.message.bytes - BatchOverhead
	checked map[string]bool // topics whose durability was checked
	log     *slog.Logger    // for the durability warnings
}

// NewLimits starts with max (--max-message-bytes) as every topic's limit;
// log takes the durability warnings (nil: discarded).
func NewLimits(max int, log *slog.Logger) *Limits {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limits{max: max, byTopic: map[string]int{},
		checked: map[string]bool{}, log: log}
}

// firstUse reports whether topic is used for the first time by this relay,
// and marks it used.
func (l *Limits) firstUse(topic string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.checked[topic] {
		return false
	}
	l.checked[topic] = true
	return true
}

// Current is the record limit for a new producer.
func (l *Limits) Current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.max
	for _, v := range l.byTopic {
		m = min(m, v)
	}
	return m
}

// Set records topic's limit (its max.message.bytes minus BatchOverhead).
func (l *Limits) Set(topic string, v int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byTopic[topic] = v
}

// Manager makes sure the topics a session writes to exist, and learns
// their size limits. Not safe for concurrent use.
type Manager struct {
	cfg     Settings
	client  sarama.Client
	admin   sarama.ClusterAdmin
	limits  *Limits
	ensured map[string]bool
	missing map[string]bool // waited for in this session and still missing
	wait    time.Duration   // bound on waiting for a missing topic to appear
}

// New returns a Manager on client (whose admin requests it uses) that
// records limits in lim.
func New(cfg Settings, client sarama.Client, lim *Limits) (*Manager, error) {
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("open Kafka admin client: %w", err)
	}
	// Closing the admin would close the shared client; the session closes
	// the client itself.
	return &Manager{cfg: cfg, client: client, admin: admin, limits: lim,
		ensured: map[string]bool{}, missing: map[string]bool{}, wait: missingTopicWait}, nil
}

// Ensure creates topic when missing and records its limit. A topic that no
// event may go to (an invalid, internal or reserved name, one outside
// AllowedTopics, or a missing one when creation is disabled) yields a
// *RejectError: the event is set aside, the
// relay goes on. Not safe for concurrent use.
func (t *Manager) Ensure(ctx context.Context, topic string) error {
	if t.ensured[topic] {
		return nil
	}
	if t.admin == nil {
		return fmt.Errorf("ensure topic %s: %w", topic, errNoCluster)
	}
	if t.cfg.Refusal != nil {
		if problem := t.cfg.Refusal(topic); problem != "" {
			return &setaside.RejectError{Reason: problem}
		}
	}
	if err := t.exist(ctx, topic); err != nil {
		return err
	}
	conf, err := t.Config(topic)
	if err != nil {
		return err
	}
	t.limits.Set(topic, conf.MaxMessageBytes-BatchOverhead)
	if t.limits.firstUse(topic) {
		conf.ReplicationFactor = t.replicationFactor(topic)
		if w := DurabilityWarning(topic, conf, len(t.client.Brokers())); w != "" {
			t.limits.log.Warn(w)
		}
	}
	t.ensured[topic] = true
	return nil
}

func (t *Manager) exist(ctx context.Context, topic string) error {
	found, err := t.Describe(topic)
	if err != nil || found {
		return err
	}
	if !t.cfg.Create {
		return t.awaitMissing(ctx, topic)
	}
	err = t.admin.CreateTopic(topic, Detail(t.cfg), false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		if errors.Is(err, sarama.ErrInvalidTopic) || errors.Is(err, sarama.ErrPolicyViolation) {
			// The broker refuses this name (or its policy does): only
			// this topic's events are affected.
			return &setaside.RejectError{Reason: fmt.Sprintf("the broker refused to create topic %q: %v", topic, err)}
		}
		if errors.Is(err, sarama.ErrInvalidReplicationFactor) || errors.Is(err, sarama.ErrInvalidPartitions) {
			return fmt.Errorf("create topic %s: %w: %w", topic, ErrSettings, err)
		}
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return t.AwaitLeaders(ctx, topic)
}

// AwaitLeaders waits until a topic just created has a leader for every
// partition in the client's metadata.
func (t *Manager) AwaitLeaders(ctx context.Context, topic string) error {
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
func (t *Manager) leadersElected(topic string) bool {
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

// Detail is how the relay creates a topic: the configured partitions,
// the configured replication factor (-1: the broker's default, which needs
// Kafka 2.4 or later) and, when set, min.insync.replicas.
func Detail(cfg Settings) *sarama.TopicDetail {
	d := &sarama.TopicDetail{NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor}
	if cfg.MinInsyncReplicas > 0 {
		v := strconv.Itoa(cfg.MinInsyncReplicas)
		d.ConfigEntries = map[string]*string{"min.insync.replicas": &v}
	}
	return d
}

// Conf is what the relay reads of a topic's configuration.
type Conf struct {
	MaxMessageBytes   int
	MinInsyncReplicas int
	ReplicationFactor int  // fewest replicas of a partition; 0: unknown
	UncleanElection   bool // unclean.leader.election.enable
}

// Topic configuration entries the relay reads.
const (
	confMaxMessageBytes   = "max.message.bytes"
	confMinInsyncReplicas = "min.insync.replicas"
	confUncleanElection   = "unclean.leader.election.enable"
)

// Config reads topic's configuration from the cluster.
func (t *Manager) Config(topic string) (Conf, error) {
	var c Conf
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
			dst = &c.MaxMessageBytes
		case confMinInsyncReplicas:
			dst = &c.MinInsyncReplicas
		case confUncleanElection:
			c.UncleanElection = e.Value == "true"
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
		c.MinInsyncReplicas = 1 // Kafka's default
	}
	return c, nil
}

// DurabilityWarning is the one-line warning for a topic whose settings let
// a record the brokers acknowledged be lost with a single broker, although
// the cluster has brokers enough to keep it: a replication factor of 1,
// min.insync.replicas 1 (on 3 brokers or more: with 2, requiring both would
// stop every write while one is down), or unclean leader election (an
// out-of-sync replica may become leader and truncate acknowledged records).
// The slot is confirmed past an acknowledged event, so nothing would send it
// again. "" when there is nothing to say.
func DurabilityWarning(topic string, c Conf, brokers int) string {
	if brokers < 2 {
		return ""
	}
	var problems []string
	if c.ReplicationFactor == 1 {
		problems = append(problems, "replication factor 1 (recreate the topic with 3 replicas, or set --topic-replication-factor for topics the relay creates)")
	}
	if c.MinInsyncReplicas < 2 && brokers >= 3 && c.ReplicationFactor != 1 {
		problems = append(problems, fmt.Sprintf("min.insync.replicas=%d (set min.insync.replicas=2 on the topic, or --topic-min-insync-replicas for topics the relay creates)", c.MinInsyncReplicas))
	}
	if c.UncleanElection {
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
func (t *Manager) replicationFactor(topic string) int {
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
// event is then set aside with ErrMissing as its reason. Later events
// of the session look once more without waiting, so a topic created since
// is used at once.
func (t *Manager) awaitMissing(ctx context.Context, topic string) error {
	deadline := time.Now().Add(t.wait)
	if t.missing[topic] {
		deadline = time.Now()
	}
	for {
		found, err := t.Describe(topic)
		if err != nil {
			return err
		}
		if found {
			delete(t.missing, topic)
			return nil
		}
		if !time.Now().Before(deadline) {
			t.missing[topic] = true
			return &setaside.RejectError{Reason: fmt.Sprintf("%s: topic %q (--create-topics is false): create it, then republish the event", ErrMissing, topic)}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Describe asks the cluster once whether topic exists. Unlike the client's
// metadata refresh, it does not retry for a topic the broker does not know:
// that retry loop would stall the stream for many seconds per missing topic.
func (t *Manager) Describe(topic string) (bool, error) {
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
			return false, &setaside.RejectError{Reason: fmt.Sprintf("the broker calls topic %q invalid", outbox.TruncateName(topic))}
		default:
			return false, fmt.Errorf("describe topic %s: %w", topic, m.Err)
		}
	}
	return false, nil
}

// EnsureCompacted creates topic when missing as one compacted partition
// (the exactly-once position topic, which keeps the latest position of
// every slot) and waits for its leader.
func (t *Manager) EnsureCompacted(ctx context.Context, topic string) error {
	found, err := t.Describe(topic)
	if err != nil || found {
		return err
	}
	compact := "compact"
	d := &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: t.cfg.ReplicationFactor,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}
	if err := t.admin.CreateTopic(topic, d, false); err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("create position topic %s: %w", topic, err)
	}
	return t.AwaitLeaders(ctx, topic)
}

// Ensured reports whether Ensure already succeeded for topic in this
// session.
func (t *Manager) Ensured(topic string) bool { return t.ensured[topic] }

// errNoCluster is what a Manager from Known answers for a topic it was not
// given.
var errNoCluster = errors.New("topic manager has no cluster")

// Known returns a Manager without a cluster for which names are already
// ensured: for code and tests that need a Manager but no broker. Any other
// topic fails with an error.
func Known(names ...string) *Manager {
	m := &Manager{ensured: map[string]bool{}, missing: map[string]bool{}, limits: NewLimits(0, nil)}
	for _, n := range names {
		m.ensured[n] = true
	}
	return m
}

package cdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// batchOverhead is kept free below a topic's max.message.bytes: the broker
// checks whole record batches against it, and a batch adds a header of 61
// bytes to its records (rounded up for safety).
const batchOverhead = 128

// limits remembers, across sessions, the record size each topic accepts. The
// producer batches every topic up to one MaxMessageBytes, so the relay uses
// the smallest limit it knows as its record limit.
type limits struct {
	mu       sync.Mutex
	max      int            // --max-message-bytes
	byTopic  map[string]int // max.message.bytes - batchOverhead
	suspects map[string]int // event id -> broker MESSAGE_TOO_LARGE refusals
}

func newLimits(max int) *limits {
	return &limits{max: max, byTopic: map[string]int{}, suspects: map[string]int{}}
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

// refused notes a broker-side MESSAGE_TOO_LARGE: the topic's limit is read
// again next session, and the event becomes a suspect.
func (l *limits) refused(topic, eventID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byTopic, topic)
	l.suspects[eventID]++
}

// refusals is how often the broker refused the event as too large.
func (l *limits) refusals(eventID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.suspects[eventID]
}

// topics makes sure the topics a session writes to exist, and learns their
// size limits.
type topics struct {
	cfg     *Config
	client  sarama.Client
	admin   sarama.ClusterAdmin
	limits  *limits
	ensured map[string]bool
}

func newTopics(cfg *Config, client sarama.Client, lim *limits) (*topics, error) {
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("open Kafka admin client: %w", err)
	}
	// Closing the admin would close the shared client; the session closes
	// the client itself.
	return &topics{cfg: cfg, client: client, admin: admin, limits: lim, ensured: map[string]bool{}}, nil
}

// ensure creates topic when missing (or fails when creation is disabled) and
// records its limit. Not safe for concurrent use.
func (t *topics) ensure(ctx context.Context, topic string) error {
	if t.ensured[topic] {
		return nil
	}
	if err := t.exist(ctx, topic); err != nil {
		return err
	}
	maxBytes, err := t.maxMessageBytes(topic)
	if err != nil {
		return err
	}
	t.limits.set(topic, maxBytes-batchOverhead)
	t.ensured[topic] = true
	return nil
}

func (t *topics) exist(ctx context.Context, topic string) error {
	_, err := t.client.Partitions(topic)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return fmt.Errorf("read partitions of topic %s: %w", topic, err)
	}
	if !t.cfg.CreateTopics {
		return fatalf(ErrTopicMissing, "topic %s does not exist and --create-topics is false: create it or allow creation", topic)
	}
	err = t.admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions:     t.cfg.TopicPartitions,
		ReplicationFactor: t.cfg.TopicReplicationFactor,
	}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		if errors.Is(err, sarama.ErrInvalidReplicationFactor) || errors.Is(err, sarama.ErrInvalidPartitions) || errors.Is(err, sarama.ErrInvalidTopic) {
			return fatal(fmt.Errorf("create topic %s: %w", topic, err))
		}
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	// The metadata of a new topic reaches every broker shortly after.
	for i := 0; ; i++ {
		if err := t.client.RefreshMetadata(topic); err == nil {
			if ps, err := t.client.Partitions(topic); err == nil && len(ps) > 0 {
				return nil
			}
		}
		if i == 50 {
			return fmt.Errorf("topic %s created but not visible in metadata", topic)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (t *topics) maxMessageBytes(topic string) (int, error) {
	entries, err := t.admin.DescribeConfig(sarama.ConfigResource{
		Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"max.message.bytes"},
	})
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	for _, e := range entries {
		if e.Name == "max.message.bytes" {
			v, err := strconv.Atoi(e.Value)
			if err != nil {
				return 0, fmt.Errorf("topic %s: max.message.bytes %q: %w", topic, e.Value, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("describe topic %s: no max.message.bytes", topic)
}

package cdc

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/eventforge/eventforge/cdc/topics"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// topicRefusal says why no outbox row may route an event to topic, or ""
// when one may. Beside the names Kafka or the relay cannot use
// (outbox.TopicProblem, which includes Kafka's internal "__" topics), the
// relay keeps to itself the topics that belong to other parts of the
// pipeline: dead-letter topics (written only by workers, and trusted by
// dlq replay) and the exactly-once position topic. With AllowedTopics set,
// every other topic is refused too. Such an event goes to outbox_rejected.
func (c *Config) topicRefusal(topic string) string {
	if p := outbox.TopicProblem(topic); p != "" {
		return p
	}
	short := outbox.TruncateName(topic)
	switch {
	case strings.HasSuffix(topic, outbox.DLQSuffix):
		return fmt.Sprintf("topic %q is a dead-letter topic (ends in %q): only workers write dead letters", short, outbox.DLQSuffix)
	case topic == c.positionTopic() || strings.HasSuffix(topic, positionTopicSuffix):
		return fmt.Sprintf("topic %q is an exactly-once position topic: only the relay writes positions", short)
	case !c.topicAllowed(topic):
		return fmt.Sprintf("topic %q is not in --allowed-topics", short)
	}
	return ""
}

// topicAllowed reports whether topic (the full name, prefix included)
// matches AllowedTopics: an entry is an exact name or a pattern with * and
// ? (path.Match). No entries: every topic.
func (c *Config) topicAllowed(topic string) bool {
	if len(c.AllowedTopics) == 0 {
		return true
	}
	for _, p := range c.AllowedTopics {
		if p == topic {
			return true
		}
		if ok, err := path.Match(p, topic); err == nil && ok {
			return true
		}
	}
	return false
}

// allowedTopicsProblems are the invalid entries of AllowedTopics.
func allowedTopicsProblems(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if p == "" {
			out = append(out, "empty entry")
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			out = append(out, fmt.Sprintf("invalid pattern %q: %v", p, err))
		}
	}
	return out
}

// topicSettings is how the relay's sessions create and police topics.
func (c *Config) topicSettings() topics.Settings {
	return topics.Settings{Create: c.CreateTopics, Partitions: c.TopicPartitions,
		ReplicationFactor: c.TopicReplicationFactor, MinInsyncReplicas: c.TopicMinInsyncReplicas,
		Refusal: c.topicRefusal}
}

// ensureTopicOrStop is m.Ensure with a topic setting the broker refused made
// fatal: every topic would fail the same way.
func ensureTopicOrStop(ctx context.Context, m *topics.Manager, topic string) error {
	err := m.Ensure(ctx, topic)
	if errors.Is(err, topics.ErrSettings) {
		return fatal(err)
	}
	return err
}

package testenv

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// RecordCount is the number of records a topic holds now, over all its
// partitions (high watermark less oldest offset).
func RecordCount(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	c, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range parts {
		hi, err := c.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		lo, err := c.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		n += hi - lo
	}
	return n
}

// CreateTopic creates topic with partitions on brokers, one replica each,
// and fails the test when it cannot.
func CreateTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// DeleteTopicsAtCleanup deletes the topics when the test ends; missing
// ones are ignored.
func DeleteTopicsAtCleanup(t testing.TB, brokers []string, topics ...string) {
	t.Cleanup(func() {
		admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
		if err != nil {
			t.Log(err)
			return
		}
		defer admin.Close()
		for _, tp := range topics {
			_ = admin.DeleteTopic(tp)
		}
	})
}

// DeleteTopicsWithPrefixAtCleanup deletes, when the test ends, every topic
// of the shared broker whose name starts with prefix: the topics a relay
// or a command created under a test's own topic prefix. prefix must be a
// test's unique name (UniqueName), never a name other tests share. Topics
// of a private broker or cluster are left alone: they go with its state
// folder.
func DeleteTopicsWithPrefixAtCleanup(t testing.TB, brokers []string, prefix string) {
	t.Helper()
	if len(prefix) < len("x_")+10 {
		t.Fatalf("DeleteTopicsWithPrefixAtCleanup: prefix %q is not a unique name", prefix)
	}
	t.Cleanup(func() {
		if !isShared(brokers) {
			return
		}
		if err := deleteTopicsWithPrefix(brokers, prefix); err != nil {
			t.Logf("delete topics %s*: %v", prefix, err)
		}
	})
}

// isShared reports whether brokers are the shared broker of Shared.
func isShared(brokers []string) bool {
	env := shared.env
	return env != nil && len(brokers) == len(env.Brokers) && strings.Join(brokers, ",") == strings.Join(env.Brokers, ",")
}

func deleteTopicsWithPrefix(brokers []string, prefix string) error {
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		return err
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		return err
	}
	var errs []error
	for name := range topics {
		if strings.HasPrefix(name, prefix) {
			if err := admin.DeleteTopic(name); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

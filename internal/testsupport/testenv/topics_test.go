package testenv

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

func TestTopicsWithPrefixAreDeletedAtCleanup(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	admin, err := sarama.NewClusterAdmin(env.Brokers, kafka.Config{Brokers: env.Brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	prefix, other := UniqueName("tp")+".", UniqueName("tp")
	DeleteTopicsAtCleanup(t, env.Brokers, other)
	mine := []string{prefix + "orders", prefix + "orders.dlq"}
	for _, tp := range append(mine, other) {
		if err := admin.CreateTopic(tp, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("use", func(t *testing.T) { DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, prefix) })
	exists := func(name string) bool {
		topics, err := admin.ListTopics()
		if err != nil {
			t.Fatal(err)
		}
		_, ok := topics[name]
		return ok
	}
	for _, tp := range mine {
		WaitFor(t, 20*time.Second, tp+" deleted", func() bool { return !exists(tp) })
	}
	if !exists(other) {
		t.Errorf("%s was deleted: it does not start with %s", other, prefix)
	}
}

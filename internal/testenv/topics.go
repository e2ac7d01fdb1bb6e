package testenv

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/kafka"
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

package testenv

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// Elections watches when Kafka names a leader other than broker lost for
// each partition of topic that lost leads when it is called (before lost
// is lost): the part of a client's resumption that is Kafka's own fencing
// and election. It asks the other brokers every 100ms, on connections of
// its own, until every such partition has moved or the test ends; the
// function it returns gives, by partition, the times seen so far.
func (c *KafkaCluster) Elections(t testing.TB, topic string, lost int) func() map[int32]time.Time {
	t.Helper()
	client, err := sarama.NewClient(c.brokers, kafka.Config{Brokers: c.brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		_ = client.Close()
		t.Fatal(err)
	}
	var led []int32
	for _, p := range parts {
		if b, err := client.Leader(topic, p); err == nil && int(b.ID()) == lost {
			led = append(led, p)
		}
	}
	look := kafka.NewLeaderLookup(client)
	var mu sync.Mutex
	moved := map[int32]time.Time{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for len(moved) < len(led) {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, p := range led {
				id, err := look.Leader(topic, p, int32(lost))
				mu.Lock()
				if _, seen := moved[p]; !seen && err == nil && int(id) != lost {
					moved[p] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; _ = client.Close() })
	return func() map[int32]time.Time {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[int32]time.Time, len(moved))
		for p, d := range moved {
			out[p] = d
		}
		return out
	}
}

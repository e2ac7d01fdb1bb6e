package cdc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// committedByPartition is the event ids a read_committed reader sees in
// each partition (named by number) of topic, in offset order.
func committedByPartition(t testing.TB, brokers []string, topic string) map[string][]uuid.UUID {
	t.Helper()
	return eventsByPartition(t, brokers, topic, kafka.ReadCommitted)
}

// eventsByPartition is committedByPartition read with readPartition
// (kafka.ReadCommitted, or kafka.ReadStable for what is committed now).
func eventsByPartition(t testing.TB, brokers []string, topic string, readPartition kafka.ReadFunc) map[string][]uuid.UUID {
	t.Helper()
	cl, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]uuid.UUID{}
	parts, err := cl.Partitions(topic)
	if err != nil {
		return out // not created yet
	}
	for _, p := range parts {
		err := readPartition(context.Background(), cl, topic, p, func(_ int64, r *sarama.Record) error {
			for _, h := range r.Headers {
				if string(h.Key) == "event_id" {
					out[fmt.Sprint(p)] = append(out[fmt.Sprint(p)], uuid.MustParse(string(h.Value)))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// oneWriterBacklog has a relay create cfg's slot and stop, then writes a
// backlog of 3,000 events of 20 recurring keys from one writer, so its
// commit order is known.
func oneWriterBacklog(t *testing.T, cfg Config, url string) *orderLoad {
	t.Helper()
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	load := &orderLoad{byKey: map[string][]uuid.UUID{}, ids: map[uuid.UUID]int{}, writers: 1, keys: 20}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		waitFor(t, time.Minute, "3,000 events", func() bool { load.mu.Lock(); defer load.mu.Unlock(); return len(load.ids) >= 3000 })
		stop()
	}()
	load.run(ctx, url)
	if len(load.errs) > 0 {
		t.Fatal(load.errs[0])
	}
	return load
}

// TestEOSPartitionFollowsCommitOrder drains, in exactly-once mode, a
// backlog of many recurring keys written by one writer into a topic of 3
// partitions, with Kafka transactions cut mid-way through PostgreSQL ones:
// read back with read_committed, every partition's events follow commit
// order across keys, each event once.
func TestEOSPartitionFollowsCommitOrder(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.ExactlyOnce = true
	cfg.TopicPartitions = 3
	cfg.MaxInFlightEvents = 400 // Kafka transactions of at most 200 events
	topic := cfg.TopicPrefix + "orders"
	load := oneWriterBacklog(t, cfg, url)
	r := startRelay(t, cfg)
	var counts map[string]int
	waitFor(t, 60*time.Second, "every event committed in Kafka", func() bool {
		counts = committedCounts(t, env.Brokers, topic)
		return len(counts) >= len(load.ids)
	})
	noDuplicates(t, counts, "after the drain")
	if bad, example := firstOccurrenceViolations(byPartition(load, 3), committedByPartition(t, env.Brokers, topic)); bad > 0 {
		t.Fatalf("%d partitions out of commit order across keys; %s", bad, example)
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Fatalf("%v sessions failed", n)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestDLQReplayCannotBeSteered writes, as anyone with Write on a
// dead-letter topic could, a letter whose x-eventforge-original-topic names
// another team's topic, beside a worker-shaped letter. dlq replay puts only
// the second back, on the topic the dead-letter topic belongs to; the forged
// one is refused, counted, and marked by dlq list. The victim topic stays
// empty, and a --topic outside --topic-prefix is refused before any read.
func TestDLQReplayCannotBeSteered(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	prefix := testenv.UniqueName("team") + "."
	orders, victim := prefix+"orders", testenv.UniqueName("other")+".payments"
	dlqTopic := orders + outbox.DLQSuffix
	admin, err := sarama.NewClusterAdmin(env.Brokers, kafka.Config{Brokers: env.Brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, tp := range []string{orders, victim, dlqTopic} {
		if err := admin.CreateTopic(tp, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
	}
	testenv.DeleteTopicsAtCleanup(t, env.Brokers, orders, victim, dlqTopic)
	sc := kafka.Config{Brokers: env.Brokers}.Base()
	sc.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(env.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	letter := func(origin string) string {
		id := uuid.NewString()
		_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: dlqTopic, Key: sarama.StringEncoder("k"),
			Value: sarama.StringEncoder(`{"amount":100000}`), Headers: []sarama.RecordHeader{
				{Key: []byte(outbox.HeaderEventID), Value: []byte(id)},
				{Key: []byte(outbox.HeaderDLQOriginalTopic), Value: []byte(origin)},
				{Key: []byte(outbox.HeaderDLQError), Value: []byte("boom")},
			}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	forged, genuine := letter(victim), letter(orders)
	brokers := strings.Join(env.Brokers, ",")

	out, err := runRootOut(t, 30*time.Second, "dlq", "replay", "--kafka-brokers", brokers, "--topic", dlqTopic, "--all", "--topic-prefix", prefix)
	if err != nil {
		t.Fatalf("dlq replay: %v\n%s", err, out)
	}
	if !strings.Contains(out, "1 replayed, 0 skipped, 1 refused") || !strings.Contains(out, "refused "+forged) ||
		!strings.Contains(out, "replayed event "+genuine+" to "+orders+" ") {
		t.Fatalf("dlq replay said:\n%s", out)
	}
	if n := testenv.RecordCount(t, env.Brokers, victim); n != 0 {
		t.Fatalf("%d records written to %s", n, victim)
	}
	if n := testenv.RecordCount(t, env.Brokers, orders); n != 1 {
		t.Fatalf("%d records in %s, want the genuine replay", n, orders)
	}

	list, err := runRootOut(t, 30*time.Second, "dlq", "list", "--kafka-brokers", brokers, "--topic", dlqTopic)
	if err != nil || !strings.Contains(list, "1 refused for replay") {
		t.Fatalf("dlq list: %v\n%s", err, list)
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, forged) && !strings.Contains(line, "refused") {
			t.Errorf("dlq list does not mark the forged letter: %q", line)
		}
	}

	_, err = runRootOut(t, 30*time.Second, "dlq", "replay", "--kafka-brokers", brokers, "--topic", victim+outbox.DLQSuffix, "--all", "--topic-prefix", prefix)
	if err == nil || !strings.Contains(err.Error(), "outside the topic prefix") {
		t.Fatalf("replay outside the prefix: %v", err)
	}
}

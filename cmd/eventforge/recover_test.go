package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestSlotRecoveryIsOneCommand: after slot drop, the command it prints next
// (cdc run --backfill-since TIME) publishes the events of the gap from the
// new slot's snapshot before the events streamed after it, so the key's
// events reach Kafka in commit order.
func TestSlotRecoveryIsOneCommand(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	conn := opsConn(t, url)
	slot, prefix := testenv.UniqueName("relay"), testenv.UniqueName("rec")+"."
	testenv.DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, prefix)
	slotstest.Create(t, url, slot, true) // a slot the relay confirmed on, whose events were then lost
	insert := func() string {
		id := uuid.NewString()
		if _, err := conn.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'orders', 'k', 'order.created', '{}')`, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	want := []string{insert(), insert()} // the gap: never published through the slot

	out, err := runOpsCmd(t, "slot", "drop", "--pg-url", url, "--slot", slot, "--yes")
	if err != nil {
		t.Fatal(err)
	}
	next := regexp.MustCompile(`next: eventforge cdc run --backfill-since (\S+)`).FindStringSubmatch(out)
	if next == nil {
		t.Fatalf("slot drop prints no next command:\n%s", out)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"cdc", "run", "--pg-url", url, "--kafka-brokers", strings.Join(env.Brokers, ","), "--slot", slot,
			"--topic-prefix", prefix, "--topic-partitions", "1", "--heartbeat-interval", "0", "--backfill-since", next[1]})
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&testenv.Buffer{})
		done <- root.ExecuteContext(ctx)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cdc run: %v", err)
		}
	}()
	testenv.WaitFor(t, time.Minute, "the relay to stream from the new slot", func() bool {
		var active bool
		err := conn.QueryRow(t.Context(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		return err == nil && active
	})
	want = append(want, insert()) // streamed
	var got []string
	testenv.WaitFor(t, time.Minute, "three events in Kafka", func() bool {
		got = eventIDsInOrder(t, env.Brokers, prefix+"orders")
		return len(got) >= len(want)
	})
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events of key k in Kafka: %v, want %v", got, want)
	}
}

// eventIDsInOrder reads partition 0 of topic from the start and returns the
// event_id headers in offset order.
func eventIDsInOrder(t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	sc := kafka.Config{Brokers: brokers}.Base()
	sc.Metadata.AllowAutoTopicCreation = false
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	high, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil || high == 0 {
		return nil
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil
	}
	defer pc.Close()
	var ids []string
	for m := range pc.Messages() {
		for _, h := range m.Headers {
			if string(h.Key) == "event_id" {
				ids = append(ids, string(h.Value))
			}
		}
		if m.Offset+1 >= high {
			break
		}
	}
	return ids
}

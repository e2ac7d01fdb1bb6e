package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestOutboxCommandsHonourTheMappingFile: outbox republish and outbox prune
// read a table with other names through one --outbox-config file (bytea
// payloads, CloudEvents records).
func TestOutboxCommandsHonourTheMappingFile(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := opsConn(t, url)
	for _, sql := range []string{
		`CREATE SCHEMA app`,
		`CREATE TABLE app.events (id uuid PRIMARY KEY, kind text NOT NULL, ref text NOT NULL, etype text NOT NULL,
			body bytea NOT NULL, written timestamptz NOT NULL)`,
		`INSERT INTO app.events SELECT gen_random_uuid(), 'parcels', 'p-' || i, 'parcel.sent', '\xff00fe'::bytea || i::text::bytea,
			now() - interval '2 days' FROM generate_series(1, 3) AS i`,
	} {
		if _, err := db.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	prefix := testenv.UniqueName("m") + "."
	testenv.DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, prefix)
	file := filepath.Join(t.TempDir(), "outbox.yaml")
	yaml := "table: app.events\nevent_id: id\ntopic: kind\nkey: ref\nevent_type: etype\npayload: body\nheaders: \"-\"\n" +
		"created_at: written\nrecord_format: cloudevents\ncloudevents_source: /parcels\ntopic_prefix: " + prefix + "\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// A topic whose partitions all have leaders: republish to a topic it has
	// just created can fail on a retry during its producer's shutdown, a
	// republish matter of its own that this test is not about.
	readyTopic(t, env.Brokers, prefix+"parcels")
	brokers := strings.Join(env.Brokers, ",")
	out, err := runOpsCmd(t, "outbox", "republish", "--pg-url", url, "--kafka-brokers", brokers, "--outbox-config", file, "--since", "2000-01-01")
	if err != nil || !strings.Contains(out, "republished 3 events") {
		t.Fatalf("republish: %q, %v", out, err)
	}
	msgs := readTopic(t, env.Brokers, prefix+"parcels")
	if len(msgs) != 3 {
		t.Fatalf("%d records, want 3", len(msgs))
	}
	for _, m := range msgs {
		hs := map[string]string{}
		for _, h := range m.Headers {
			hs[string(h.Key)] = string(h.Value)
		}
		if hs["ce_type"] != "parcel.sent" || hs["ce_source"] != "/parcels" || hs["content-type"] != "application/octet-stream" ||
			hs["ce_subject"] != string(m.Key) || !bytes.HasPrefix(m.Value, []byte{0xff, 0x00, 0xfe}) || len(m.Value) != 4 {
			t.Errorf("record key %q value %x headers %v", m.Key, m.Value, hs)
		}
	}

	slot := testenv.UniqueName("slot")
	slotstest.Create(t, url, slot, true)
	slotstest.KeepConfirming(t, url, slot)
	out, err = runOpsCmd(t, "outbox", "prune", "--pg-url", url, "--outbox-config", file, "--older-than", "24h")
	if err != nil || !strings.Contains(out, "pruned 3 outbox rows") {
		t.Fatalf("prune: %q, %v", out, err)
	}
	var left int
	if err := db.QueryRow(t.Context(), "SELECT count(*) FROM app.events").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows left, %v", left, err)
	}
}

// readyTopic creates topic and waits until each partition has a leader.
func readyTopic(t *testing.T, brokers []string, topic string) {
	t.Helper()
	testenv.CreateTopic(t, brokers, topic, 3)
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	testenv.WaitFor(t, 30*time.Second, "leaders of "+topic, func() bool {
		if client.RefreshMetadata(topic) != nil {
			return false
		}
		for p := int32(0); p < 3; p++ {
			if _, err := client.Leader(topic, p); err != nil {
				return false
			}
		}
		return true
	})
}

// readTopic reads every record of topic, up to its high-water marks.
func readTopic(t *testing.T, brokers []string, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []*sarama.ConsumerMessage
	for _, part := range parts {
		high, err := client.GetOffset(topic, part, sarama.OffsetNewest)
		if err != nil || high == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, part, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for m := range pc.Messages() {
			out = append(out, m)
			if m.Offset+1 >= high {
				break
			}
		}
		pc.Close()
	}
	return out
}

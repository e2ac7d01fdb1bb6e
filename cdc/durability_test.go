package cdc

import (
	"context"
	"strconv"
	"testing"

	"github.com/eventforge/eventforge/cdc/topics"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestTopicDetail(t *testing.T) {
	cfg := DefaultConfig()
	d := topics.Detail(cfg.topicSettings())
	if d.ReplicationFactor != -1 || d.ConfigEntries != nil {
		t.Fatalf("default topic detail %+v: want the broker's replication factor and min.insync.replicas", d)
	}
	cfg.TopicMinInsyncReplicas = 2
	if v := topics.Detail(cfg.topicSettings()).ConfigEntries["min.insync.replicas"]; v == nil || *v != "2" {
		t.Fatalf("min.insync.replicas not set: %v", v)
	}
}

// TestCreatedTopicDurability creates a topic as the relay does and reads it
// back: min.insync.replicas is the configured one, and the replication
// factor is the broker's default.replication.factor.
func TestCreatedTopicDurability(t *testing.T) {
	env := testenv.Shared(t)
	cfg := testConfig(t, env.PGURL, env.Brokers)
	cfg.TopicMinInsyncReplicas = 2
	sc, err := cfg.producerConfig(cfg.MaxMessageBytes)
	if err != nil {
		t.Fatal(err)
	}
	client, err := sarama.NewClient(cfg.Kafka.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	tp, err := topics.New(cfg.topicSettings(), client, topics.NewLimits(cfg.MaxMessageBytes, nil))
	if err != nil {
		t.Fatal(err)
	}
	topic := cfg.TopicPrefix + "durable"
	if err := tp.Ensure(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := kafka.DescribeConfig(admin, sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"min.insync.replicas"}})
	if err != nil || len(entries) != 1 || entries[0].Value != "2" {
		t.Fatalf("min.insync.replicas of the created topic: %+v, %v; want 2", entries, err)
	}
	brokers := client.Brokers()
	entries, err = kafka.DescribeConfig(admin, sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(brokers[0].ID())),
		ConfigNames: []string{"default.replication.factor"}})
	if err != nil || len(entries) != 1 {
		t.Fatalf("broker default.replication.factor: %+v, %v", entries, err)
	}
	want, _ := strconv.Atoi(entries[0].Value)
	md, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(md) != 1 || len(md[0].Partitions) == 0 {
		t.Fatalf("describe %s: %+v, %v", topic, md, err)
	}
	for _, p := range md[0].Partitions {
		if len(p.Replicas) != want {
			t.Fatalf("partition %d has %d replicas, want the broker default %d", p.ID, len(p.Replicas), want)
		}
	}
}

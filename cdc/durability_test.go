package cdc

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/testenv"
)

func TestDurabilityWarning(t *testing.T) {
	safe := topicConf{minInsyncReplicas: 2, replicationFactor: 3}
	with := func(f func(*topicConf)) topicConf { c := safe; f(&c); return c }
	tests := []struct {
		name   string
		conf   topicConf
		broker int
		want   []string // parts of the warning; none: no warning
	}{
		{"single broker", topicConf{minInsyncReplicas: 1, replicationFactor: 1}, 1, nil},
		{"two brokers, min.insync 1", with(func(c *topicConf) { c.minInsyncReplicas, c.replicationFactor = 1, 2 }), 2, nil},
		{"three brokers, default min.insync", with(func(c *topicConf) { c.minInsyncReplicas = 1 }), 3, []string{"min.insync.replicas=1", "--topic-min-insync-replicas"}},
		{"five brokers, default min.insync", with(func(c *topicConf) { c.minInsyncReplicas = 1 }), 5, []string{"min.insync.replicas=1"}},
		{"three brokers, min.insync 2", safe, 3, nil},
		{"three brokers, min.insync 3", with(func(c *topicConf) { c.minInsyncReplicas = 3 }), 3, nil},
		{"unknown broker count", with(func(c *topicConf) { c.minInsyncReplicas = 1 }), 0, nil},
		{"replication factor 1 on two brokers", with(func(c *topicConf) { c.replicationFactor, c.minInsyncReplicas = 1, 1 }), 2,
			[]string{"replication factor 1", "--topic-replication-factor"}},
		{"replication factor unknown", with(func(c *topicConf) { c.replicationFactor = 0 }), 3, nil},
		{"unclean election", with(func(c *topicConf) { c.uncleanElection = true }), 3, []string{"unclean.leader.election.enable=true"}},
		{"all at once, one line", topicConf{minInsyncReplicas: 1, replicationFactor: 2, uncleanElection: true}, 3,
			[]string{"min.insync.replicas=1", "unclean.leader.election.enable=true", "cluster of 3 brokers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := durabilityWarning("orders", tt.conf, tt.broker)
			if (w != "") != (len(tt.want) > 0) {
				t.Fatalf("durabilityWarning(%+v, brokers=%d) = %q, want a warning: %v", tt.conf, tt.broker, w, len(tt.want) > 0)
			}
			for _, part := range tt.want {
				if !strings.Contains(w, part) {
					t.Errorf("warning %q lacks %q", w, part)
				}
			}
			if w != "" && (!strings.Contains(w, "orders") || strings.Contains(w, "\n")) {
				t.Fatalf("warning %q must be one line naming the topic", w)
			}
		})
	}
}

func TestTopicDetail(t *testing.T) {
	cfg := DefaultConfig()
	d := topicDetail(&cfg)
	if d.ReplicationFactor != -1 || d.ConfigEntries != nil {
		t.Fatalf("default topic detail %+v: want the broker's replication factor and min.insync.replicas", d)
	}
	cfg.TopicMinInsyncReplicas = 2
	if v := topicDetail(&cfg).ConfigEntries["min.insync.replicas"]; v == nil || *v != "2" {
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
	tp, err := newTopics(&cfg, client, newLimits(cfg.MaxMessageBytes))
	if err != nil {
		t.Fatal(err)
	}
	topic := cfg.TopicPrefix + "durable"
	if err := tp.ensure(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	entries, err := kafka.DescribeConfig(tp.admin, sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"min.insync.replicas"}})
	if err != nil || len(entries) != 1 || entries[0].Value != "2" {
		t.Fatalf("min.insync.replicas of the created topic: %+v, %v; want 2", entries, err)
	}
	brokers := client.Brokers()
	entries, err = kafka.DescribeConfig(tp.admin, sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(brokers[0].ID())),
		ConfigNames: []string{"default.replication.factor"}})
	if err != nil || len(entries) != 1 {
		t.Fatalf("broker default.replication.factor: %+v, %v", entries, err)
	}
	want, _ := strconv.Atoi(entries[0].Value)
	md, err := tp.admin.DescribeTopics([]string{topic})
	if err != nil || len(md) != 1 || len(md[0].Partitions) == 0 {
		t.Fatalf("describe %s: %+v, %v", topic, md, err)
	}
	for _, p := range md[0].Partitions {
		if len(p.Replicas) != want {
			t.Fatalf("partition %d has %d replicas, want the broker default %d", p.ID, len(p.Replicas), want)
		}
	}
}

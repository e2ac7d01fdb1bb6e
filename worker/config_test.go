package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/kafka"
)

func validConfig() Config {
	return Config{Kafka: kafka.Config{Brokers: []string{"127.0.0.1:9092"}}, Group: "g", Topics: []string{"orders"}}
}

func TestConfigDefaults(t *testing.T) {
	c := validConfig().withDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Consumer != "g" || c.MaxAttempts != DefaultMaxAttempts || c.BatchSize != DefaultBatchSize ||
		c.RetryBackoff != DefaultRetryBackoff || c.Logger == nil || c.Registerer == nil {
		t.Errorf("defaults not applied: %+v", c)
	}
	sc := c.consumerConfig()
	if sc.Consumer.Offsets.Initial != sarama.OffsetOldest || sc.Consumer.Offsets.AutoCommit.Enable || sc.Metadata.AllowAutoTopicCreation {
		t.Error("consumer must start at the oldest offset, commit manually and never create topics")
	}
	if err := sc.Validate(); err != nil {
		t.Errorf("consumer config: %v", err)
	}
	pc := c.producerConfig()
	if !pc.Producer.Idempotent || pc.Producer.RequiredAcks != sarama.WaitForAll {
		t.Error("dead letters need the idempotent producer with acks from all replicas")
	}
	if err := pc.Validate(); err != nil {
		t.Errorf("producer config: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, "no Kafka brokers"},
		{"no group", func(c *Config) { c.Group = "" }, "no consumer group"},
		{"no topics", func(c *Config) { c.Topics = nil }, "no topics"},
		{"empty topic", func(c *Config) { c.Topics = []string{""} }, "invalid topic"},
		{"dlq topic", func(c *Config) { c.Topics = []string{"orders.dlq"} }, "dead-letter topic"},
		{"negative attempts", func(c *Config) { c.MaxAttempts = -1 }, "--max-attempts"},
		{"negative batch", func(c *Config) { c.BatchSize = -5 }, "--batch-size"},
		{"negative backoff", func(c *Config) { c.RetryBackoff = -time.Second }, "--retry-backoff"},
		{"max below first backoff", func(c *Config) { c.RetryBackoff = time.Minute; c.MaxBackoff = time.Second }, "below --retry-backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(&c)
			err := c.withDefaults().Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestTake(t *testing.T) {
	ch := make(chan *sarama.ConsumerMessage, 10)
	for i := range 5 {
		ch <- &sarama.ConsumerMessage{Offset: int64(i + 1)}
	}
	first := &sarama.ConsumerMessage{Offset: 0}
	if got := take(first, ch, 3); len(got) != 3 || got[0] != first || got[2].Offset != 2 {
		t.Fatalf("take 3 = %d messages", len(got))
	}
	if got := take(first, ch, 10); len(got) != 4 { // 3 left in ch, no wait for more
		t.Fatalf("take up to 10 = %d messages, want 4", len(got))
	}
	close(ch)
	if got := take(first, ch, 10); len(got) != 1 {
		t.Fatalf("take from closed = %d messages, want 1", len(got))
	}
}

func TestSamePartitioner(t *testing.T) {
	p := samePartitioner{}
	for _, tt := range []struct{ orig, n, want int32 }{{0, 3, 0}, {2, 3, 2}, {5, 3, 2}, {-1, 3, 0}} {
		got, err := p.Partition(&sarama.ProducerMessage{Partition: tt.orig}, tt.n)
		if err != nil || got != tt.want {
			t.Errorf("Partition(orig %d, n %d) = %d, %v; want %d", tt.orig, tt.n, got, err, tt.want)
		}
	}
}

package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
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
	if sc.Consumer.IsolationLevel != sarama.ReadCommitted {
		t.Error("the worker must read with read_committed, so aborted transactions of an exactly-once relay are never applied")
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
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, "Config.Kafka.Brokers: required"},
		{"no group", func(c *Config) { c.Group = "" }, "Config.Group: required"},
		{"no topics", func(c *Config) { c.Topics = nil }, "Config.Topics: required"},
		{"empty topic", func(c *Config) { c.Topics = []string{""} }, "invalid topic"},
		{"dlq topic", func(c *Config) { c.Topics = []string{"orders.dlq"} }, "dead-letter topic"},
		{"negative attempts", func(c *Config) { c.MaxAttempts = -1 }, "Config.MaxAttempts: must be positive"},
		{"negative batch", func(c *Config) { c.BatchSize = -5 }, "Config.BatchSize: must be positive"},
		{"negative batch bytes", func(c *Config) { c.BatchBytes = -1 }, "Config.BatchBytes: must be positive"},
		{"negative backoff", func(c *Config) { c.RetryBackoff = -time.Second }, "Config.RetryBackoff: must be positive"},
		{"max below first backoff", func(c *Config) { c.RetryBackoff = time.Minute; c.MaxBackoff = time.Second }, "Config.MaxBackoff: 1s is below Config.RetryBackoff 1m0s"},
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
	msg := func(offset int64, size int) *sarama.ConsumerMessage {
		return &sarama.ConsumerMessage{Offset: offset, Key: []byte("k"), Value: make([]byte, size-1)}
	}
	tests := []struct {
		name      string
		waiting   []int // sizes of the records already in the channel
		closed    bool
		n, bytes  int
		want      int   // records taken, the first included
		wantCarry int64 // offset of the record carried over; -1: none
	}{
		{"up to n", []int{10, 10, 10, 10, 10}, false, 3, 1000, 3, -1},
		{"no wait for more", []int{10, 10, 10}, false, 10, 1000, 4, -1},
		{"closed channel", nil, true, 10, 1000, 1, -1},
		{"byte bound carries the next", []int{10, 10, 10}, false, 10, 25, 2, 2},
		{"exactly at the byte bound", []int{10, 10}, false, 10, 30, 3, -1},
		{"oversized first alone", []int{10}, false, 10, 5, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := make(chan *sarama.ConsumerMessage, 10)
			for i, size := range tt.waiting {
				ch <- msg(int64(i+1), size)
			}
			if tt.closed {
				close(ch)
			}
			first := msg(0, 10)
			got, carry := take(first, ch, tt.n, tt.bytes)
			if len(got) != tt.want || got[0] != first {
				t.Fatalf("took %d messages, want %d starting with the first", len(got), tt.want)
			}
			for i, m := range got {
				if m.Offset != int64(i) {
					t.Errorf("message %d has offset %d", i, m.Offset)
				}
			}
			switch {
			case tt.wantCarry < 0 && carry != nil:
				t.Errorf("carried offset %d, want none", carry.Offset)
			case tt.wantCarry >= 0 && (carry == nil || carry.Offset != tt.wantCarry):
				t.Errorf("carried %v, want offset %d", carry, tt.wantCarry)
			}
		})
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

// TestValidateReportsEveryProblem: one Validate names every field at fault,
// one per line, so a user fixes them in one go.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.MaxAttempts, c.Topics = -1, []string{"orders.dlq"}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	for _, want := range []string{"Config.Kafka.Brokers: required", "Config.Group: required", `Config.Topics: topic "orders.dlq" is a dead-letter topic`, "Config.MaxAttempts: must be positive, got -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v\nwant a line %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("Validate() has %d lines, want 4:\n%v", n, err)
	}
	c.Kafka.Brokers, c.Group, c.Topics, c.MaxAttempts = []string{"localhost:9092"}, "g", []string{"orders"}, DefaultMaxAttempts
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig with the required fields: %v", err)
	}
}

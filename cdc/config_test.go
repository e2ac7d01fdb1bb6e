package cdc

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

func validConfig() Config {
	c := DefaultConfig()
	c.PGURL = "postgres://u:secret@localhost:5432/db"
	c.Kafka = kafka.Config{Brokers: []string{"localhost:9092"}}
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // substring; empty means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no pg url", func(c *Config) { c.PGURL = "" }, "Config.PGURL: required"},
		{"bad pg url hides password", func(c *Config) { c.PGURL = "postgres://u:secret@[::1" }, "invalid PostgreSQL URL"},
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, "Config.Kafka.Brokers: required"},
		{"slot upper case", func(c *Config) { c.Slot = "Relay" }, "Config.Slot: invalid slot name"},
		{"slot dash", func(c *Config) { c.Slot = "my-slot" }, "Config.Slot: invalid slot name"},
		{"slot too long", func(c *Config) { c.Slot = strings.Repeat("a", 64) }, "Config.Slot: invalid slot name"},
		{"publication quote", func(c *Config) { c.Publication = "x'y" }, "Config.Publication: invalid"},
		{"outbox table", func(c *Config) { c.OutboxTable = "a.b.c" }, "outbox table"},
		{"outbox table without schema", func(c *Config) { c.OutboxTable = "events" }, ""},
		{"partitions", func(c *Config) { c.TopicPartitions = -1 }, "Config.TopicPartitions: -1"},
		{"replication", func(c *Config) { c.TopicReplicationFactor = -2 }, "Config.TopicReplicationFactor: -2"},
		{"broker default replication", func(c *Config) { c.TopicReplicationFactor = -1 }, ""},
		{"min insync", func(c *Config) { c.TopicMinInsyncReplicas = -1 }, "Config.TopicMinInsyncReplicas: -1"},
		{"min insync above replication", func(c *Config) { c.TopicReplicationFactor, c.TopicMinInsyncReplicas = 2, 3 }, "exceeds Config.TopicReplicationFactor"},
		{"min insync with broker default replication", func(c *Config) { c.TopicMinInsyncReplicas = 2 }, ""},
		{"window events", func(c *Config) { c.MaxInFlightEvents = -1 }, "Config.MaxInFlightEvents: -1"},
		{"window bytes", func(c *Config) { c.MaxInFlightBytes = -1 }, "Config.MaxInFlightBytes: -1"},
		{"message bytes", func(c *Config) { c.MaxMessageBytes = 10 }, "Config.MaxMessageBytes: 10"},
		{"compression", func(c *Config) { c.Compression = "brotli" }, "Config.Compression: invalid compression"},
		{"exactly-once", func(c *Config) { c.ExactlyOnce = true }, ""},
		{"exactly-once with a backfill", func(c *Config) { c.ExactlyOnce, c.BackfillAll = true, true }, "Config.ExactlyOnce does not cover the snapshot backfill"},
		{"position topic", func(c *Config) { c.PositionTopic = "bad topic" }, "Config.PositionTopic: invalid topic"},
		{"txn interval", func(c *Config) { c.TxnInterval = -time.Second }, "Config.TxnInterval: -1s"},
		{"compression zstd", func(c *Config) { c.Compression = "ZSTD" }, ""},
		{"backoff", func(c *Config) { c.ReconnectMin, c.ReconnectMax = time.Minute, time.Second }, "Config.ReconnectMax: 1s is below Config.ReconnectMin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Slot != "eventforge" || c.Publication != "eventforge_outbox" || c.TopicPartitions != 12 || c.TopicReplicationFactor != -1 || c.TopicMinInsyncReplicas != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	if c.HeartbeatInterval != 10*time.Second || c.MaxInFlightEvents <= 0 || c.MaxInFlightBytes <= 0 {
		t.Fatalf("defaults: %+v", c)
	}
	if !DefaultConfig().CreateTopics {
		t.Fatal("DefaultConfig creates no topics")
	}
	neg := Config{HeartbeatInterval: -1}.withDefaults()
	if neg.HeartbeatInterval >= 0 {
		t.Fatal("a negative heartbeat interval (disabled) was replaced")
	}
}

func TestProducerConfig(t *testing.T) {
	c := validConfig()
	sc, err := c.producerConfig(5000)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Producer.Idempotent || sc.Net.MaxOpenRequests != 1 || sc.Producer.MaxMessageBytes != 5000 {
		t.Fatalf("producer config not idempotent or limit not applied: %+v", sc.Producer)
	}
	if sc.Metadata.AllowAutoTopicCreation {
		t.Fatal("the producer may auto-create topics with broker defaults")
	}
	if err := sc.Validate(); err != nil {
		t.Fatalf("sarama rejects the config: %v", err)
	}
}

// TestEOSTxnBackoff: transaction retries stay at a millisecond or less
// through a brief coordinator stall, then back off to eosRetryMost.
func TestEOSTxnBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, eosRetryFirst},
		{1, 2 * eosRetryFirst},
		{2, eosRetryFast},
		{eosFastRetries - 1, eosRetryFast},
		{eosFastRetries, 2 * eosRetryFast},
		{eosFastRetries + 1, 4 * eosRetryFast},
		{eosFastRetries + 20, eosRetryMost},
	} {
		if got := eosTxnBackoff(tc.n); got != tc.want {
			t.Errorf("eosTxnBackoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	var fast time.Duration
	for n := range eosFastRetries {
		fast += eosTxnBackoff(n)
	}
	if fast < 15*time.Millisecond || fast > 25*time.Millisecond {
		t.Errorf("the fast retries wait %v in all: want a brief stall's worth, 15-25 ms", fast)
	}
	var all time.Duration
	for n := range eosTxnRetries {
		all += eosTxnBackoff(n)
	}
	if all < 4*time.Second || all > 5*time.Second {
		t.Errorf("all %d retries wait %v: want about 4 s before the session starts over", eosTxnRetries, all)
	}
}

// TestProducerConfigExactlyOnce: a transactional producer whose id is
// derived from the slot, so a later relay of the slot fences an earlier one;
// sarama accepts it.
func TestProducerConfigExactlyOnce(t *testing.T) {
	c := validConfig()
	c.ExactlyOnce = true
	sc, err := c.producerConfig(5000)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Producer.Transaction.ID != "eventforge-"+c.Slot || !sc.Producer.Idempotent || sc.Net.MaxOpenRequests != 1 {
		t.Fatalf("not a transactional producer of the slot: id %q", sc.Producer.Transaction.ID)
	}
	if err := sc.Validate(); err != nil {
		t.Fatalf("sarama rejects the config: %v", err)
	}
	if sc.Producer.Flush.Frequency != eosLinger || sc.Producer.Transaction.Retry.BackoffFunc(0, 50) != eosRetryFirst {
		t.Fatalf("linger %v, first transaction retry %v: want %v and %v", sc.Producer.Flush.Frequency,
			sc.Producer.Transaction.Retry.BackoffFunc(0, 50), eosLinger, eosRetryFirst)
	}
	c.FlushFrequency = 7 * time.Millisecond
	if sc, _ := c.producerConfig(5000); sc.Producer.Flush.Frequency != c.FlushFrequency {
		t.Fatalf("a configured flush wait %v became %v", c.FlushFrequency, sc.Producer.Flush.Frequency)
	}
	c.FlushFrequency, c.ExactlyOnce = 0, false
	sc, _ = c.producerConfig(5000)
	if sc.Producer.Transaction.ID != "" {
		t.Fatal("at-least-once mode must not be transactional")
	}
	if sc.Producer.Flush.Frequency != 0 {
		t.Fatalf("at-least-once mode lingers %v: live events must go out at once", sc.Producer.Flush.Frequency)
	}
}

func TestStatusInterval(t *testing.T) {
	tests := []struct {
		configured, walSenderTimeout, want time.Duration
	}{
		{0, time.Minute, 10 * time.Second},
		{0, 8 * time.Second, 4 * time.Second},
		{0, 0, 10 * time.Second}, // timeout disabled
		{2 * time.Second, time.Minute, 2 * time.Second},
		{30 * time.Second, 20 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := statusInterval(tt.configured, tt.walSenderTimeout); got != tt.want {
			t.Errorf("statusInterval(%s, %s) = %s, want %s", tt.configured, tt.walSenderTimeout, got, tt.want)
		}
	}
}

func TestActivePID(t *testing.T) {
	tests := []struct {
		msg  string
		want int32
	}{
		{`replication slot "eventforge" is active for PID 4242`, 4242},
		{"something else", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := activePID(&pgconn.PgError{Code: pgerrcode.ObjectInUse, Message: tt.msg}); got != tt.want {
			t.Errorf("activePID(%q) = %d, want %d", tt.msg, got, tt.want)
		}
	}
}

// TestCommitToAckBuckets checks the latency histogram can judge a 10 ms p99:
// bounds ascend, step 0.5 ms up to 10 ms, and reach minutes.
func TestCommitToAckBuckets(t *testing.T) {
	b := commitToAckBuckets()
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			t.Fatalf("bucket %d (%g) not above %g", i, b[i], b[i-1])
		}
	}
	for i, want := range []float64{0.0005, 0.001, 0.005, 0.0095, 0.01} {
		found := false
		for _, v := range b {
			found = found || math.Abs(v-want) < 1e-9
		}
		if !found {
			t.Errorf("case %d: no bucket bound at %g s", i, want)
		}
	}
	if last := b[len(b)-1]; last < 300 {
		t.Errorf("last bound %g s, want minutes", last)
	}
}

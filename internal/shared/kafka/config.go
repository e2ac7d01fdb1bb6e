package kafka

import (
	"errors"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
	"github.com/eventforge/eventforge/internal/shared/fielderr"
)

// DefaultVersion is the protocol version EventForge speaks. Kafka 4 removed
// protocol versions older than 2.1, so it is always set explicitly; sarama
// negotiates each API's version within it.
var DefaultVersion = sarama.V4_0_0_0

// Config is what every EventForge Kafka client needs.
type Config struct {
	Brokers  []string // host:port, at least one
	ClientID string   // shows up in broker logs and quotas
	Security Security // TLS and SASL; the zero value is plaintext
	// Timeouts bound the waits on a broker (a frozen broker keeps its
	// connections open); the zero value takes the defaults.
	Timeouts Timeouts
}

// Validate reports every problem of a configuration that cannot work
// (errors.Join), each naming its field as the Kafka field of a library's
// Config ("Config.Kafka.Brokers: required").
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, fielderr.New("Config.Kafka.Brokers", "required"))
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			errs = append(errs, fielderr.New("Config.Kafka.Brokers", "kafka broker %q is not host:port", b))
		}
	}
	return errors.Join(append(errs, c.Security.Validate(), c.Timeouts.Validate())...)
}

// ParseBrokers splits a comma-separated host:port list, dropping blanks.
func ParseBrokers(list string) []string {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Base returns a sarama configuration with the version, client id and
// timeouts every EventForge client shares.
func (c Config) Base() *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = DefaultVersion
	sc.ClientID = "eventforge"
	if c.ClientID != "" {
		sc.ClientID = c.ClientID
	}
	c.Timeouts.apply(sc)
	sc.Metadata.Retry.Max = 5
	sc.Metadata.Retry.Backoff = 500 * time.Millisecond
	c.Security.apply(sc)
	return sc
}

// ProducerOptions tune the idempotent producer; zero values take defaults.
type ProducerOptions struct {
	Compression sarama.CompressionCodec // default none
	// FlushBytes and FlushMaxWait make the producer hold records back to
	// fill bigger requests (a linger). Zero, the default, sends as soon as
	// the broker connection is free: with one open request per broker,
	// records that arrive during a round trip go out together in the next
	// request, so batches grow with load while a lone record waits for no
	// timer. Setting only FlushBytes also sets a 5 ms FlushMaxWait, so a
	// record is never held back indefinitely.
	FlushBytes      int
	FlushMaxWait    time.Duration
	MaxMessageBytes int // default sarama's (1,000,000)
}

// IdempotentProducer returns the configuration of docs/design.md#idempotent-producer: idempotent,
// acks from all in-sync replicas, one open request per broker, retries on,
// the Java client's partitioner, and both result channels enabled (rule 14:
// the caller drains both).
func (c Config) IdempotentProducer(o ProducerOptions) *sarama.Config {
	sc := c.Base()
	sc.Producer.Idempotent = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Net.MaxOpenRequests = 1
	// Retriable errors (a leader moving, a broker restarting) are retried for
	// about ten minutes (backoff capped at 1s): an error handed back while
	// later records still go out would let them land ahead of a gap and break
	// per-key order (docs/design.md#produce-error-ends-session). sarama keeps a slot per retry level and
	// partition, so the cap is a number, not infinity.
	sc.Producer.Retry.Max = 600
	sc.Producer.Retry.BackoffFunc = cappedBackoff(100*time.Millisecond, time.Second)
	sc.Metadata.Retry.Max = 20
	sc.Metadata.Retry.BackoffFunc = cappedBackoff(250*time.Millisecond, time.Second)
	sc.Producer.Return.Successes = true
	sc.Producer.Return.Errors = true
	sc.Producer.Partitioner = NewJavaPartitioner
	sc.Producer.Compression = o.Compression
	// sarama flushes as soon as it can only when Bytes, Frequency and
	// Messages are all zero; with a byte trigger alone it would wait for it.
	sc.Producer.Flush.Bytes = max(o.FlushBytes, 0)
	sc.Producer.Flush.Frequency = max(o.FlushMaxWait, 0)
	sc.Producer.Flush.Messages = 0
	if sc.Producer.Flush.Bytes > 0 && sc.Producer.Flush.Frequency == 0 {
		sc.Producer.Flush.Frequency = 5 * time.Millisecond
	}
	if o.MaxMessageBytes > 0 {
		sc.Producer.MaxMessageBytes = o.MaxMessageBytes
	}
	return sc
}

// cappedBackoff doubles from first up to most, as sarama's BackoffFunc.
func cappedBackoff(first, most time.Duration) func(retries, maxRetries int) time.Duration {
	return func(retries, _ int) time.Duration { return backoff.Exponential(first, most, retries) }
}

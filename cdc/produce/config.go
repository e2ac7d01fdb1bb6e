package produce

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
)

// Defaults of Config.
const (
	DefaultMaxGenerationRecords = 4096
	DefaultMaxRequestBytes      = 16 << 20
	DefaultMaxAttempts          = 6
	DefaultRetryFirst           = 200 * time.Millisecond
	DefaultRetryMost            = 5 * time.Second
	DefaultTimeout              = 10 * time.Second
	DefaultTransactionTimeout   = time.Minute
	DefaultTxnRetries           = 50
)

// DefaultTxnBackoff is the wait before retry n (0-based) of a request to
// the transaction coordinator: 10 ms doubling up to 100 ms.
func DefaultTxnBackoff(n int) time.Duration {
	return backoff.Exponential(10*time.Millisecond, 100*time.Millisecond, n)
}

// Config is an Engine's configuration: zero fields take their defaults
// (WithDefaults), then Validate reports every problem at once.
type Config struct {
	// MaxGenerationRecords caps the records of one generation, which is
	// one record batch on the wire; default 4096.
	MaxGenerationRecords int
	// MaxGenerationBytes caps a generation's records' encoded size (the
	// sum of Record.Size); required: the smallest record limit of the
	// topics written, so a generation always fits one batch.
	MaxGenerationBytes int
	// Linger is how long a partition's queued records may wait for more
	// before they go out as a generation smaller than LingerBytes; default
	// 0: a generation is cut as soon as the partition has none in flight.
	Linger time.Duration
	// LingerBytes is the generation size that ends a linger at once;
	// default 0: with a Linger, only MaxGenerationRecords and
	// MaxGenerationBytes end it early.
	LingerBytes int
	// MaxRequestBytes caps one produce request, which carries the
	// generations of many partitions led by one broker; default 16 MiB.
	MaxRequestBytes int
	// MaxAttempts is how many times a generation refused with a retriable
	// error is sent before Run ends with the error (a new session starts
	// from the confirmed position); default 6.
	MaxAttempts int
	// RetryFirst and RetryMost bound the wait before a generation is sent
	// again: it doubles from RetryFirst up to RetryMost; defaults 200 ms
	// and 5 s.
	RetryFirst, RetryMost time.Duration
	// LeaderWait is how long, after a partition's leader left a request
	// unanswered (frozen or gone), the engine asks the other brokers for a
	// new leader before it sends to the silent one again; default
	// DefaultLeaderWait (15 s).
	LeaderWait time.Duration
	// Codec and CompressionLevel compress each batch; default none.
	Codec            sarama.CompressionCodec
	CompressionLevel int
	// Timeout is the broker's wait for the in-sync replicas' acks, sent in
	// each request; default 10 s.
	Timeout time.Duration
	// TransactionalID, when set, makes the engine that id's transactional
	// producer: records go out in Kafka transactions, each ended by a
	// Record with Commit set. Default none: an idempotent producer.
	TransactionalID string
	// TransactionTimeout is how long the coordinator keeps a transaction
	// open without an end before it aborts it; default 1 minute.
	TransactionTimeout time.Duration
	// TxnRetries bounds the retries of a request to the transaction
	// coordinator refused with a retriable error (the previous
	// transaction's markers still being written, the coordinator moving);
	// default 50. TxnBackoff is the wait before retry n (0-based); default
	// DefaultTxnBackoff.
	TxnRetries int
	TxnBackoff func(n int) time.Duration
	// Version is the Kafka protocol version spoken; it picks the produce
	// request version (v8 and later carry per-record errors). Default
	// sarama.V2_8_0_0.
	Version sarama.KafkaVersion
}

// FromSarama takes the compression, flush settings (Flush.Frequency as
// Linger, Flush.Bytes as LingerBytes), timeout, version and the transaction
// timeout and retries of a sarama producer configuration; not its
// transactional id, which only the exactly-once relay sets.
func FromSarama(sc *sarama.Config, maxGenerationBytes int) Config {
	var txnBackoff func(int) time.Duration
	if f := sc.Producer.Transaction.Retry.BackoffFunc; f != nil {
		most := sc.Producer.Transaction.Retry.Max
		txnBackoff = func(n int) time.Duration { return f(n, most) }
	}
	return Config{
		TransactionTimeout: sc.Producer.Transaction.Timeout,
		TxnRetries:         sc.Producer.Transaction.Retry.Max,
		TxnBackoff:         txnBackoff,
		MaxGenerationBytes: maxGenerationBytes,
		Linger:             sc.Producer.Flush.Frequency,
		LingerBytes:        sc.Producer.Flush.Bytes,
		Codec:              sc.Producer.Compression,
		CompressionLevel:   sc.Producer.CompressionLevel,
		Timeout:            sc.Producer.Timeout,
		Version:            sc.Version,
	}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	orDefault(&c.MaxGenerationRecords, DefaultMaxGenerationRecords)
	orDefault(&c.MaxRequestBytes, DefaultMaxRequestBytes)
	orDefault(&c.MaxAttempts, DefaultMaxAttempts)
	orDefault(&c.RetryFirst, DefaultRetryFirst)
	orDefault(&c.RetryMost, DefaultRetryMost)
	orDefault(&c.LeaderWait, DefaultLeaderWait)
	orDefault(&c.Timeout, DefaultTimeout)
	orDefault(&c.Version, sarama.V2_8_0_0)
	orDefault(&c.TransactionTimeout, DefaultTransactionTimeout)
	orDefault(&c.TxnRetries, DefaultTxnRetries)
	if c.TxnBackoff == nil {
		c.TxnBackoff = DefaultTxnBackoff
	}
	return c
}

// orDefault sets *p to def when it is the zero value.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("produce.Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.MaxGenerationRecords < 1 {
		add("MaxGenerationRecords", "%d: must be at least 1", c.MaxGenerationRecords)
	}
	if c.MaxGenerationBytes < 1 {
		add("MaxGenerationBytes", "%d: must be at least 1", c.MaxGenerationBytes)
	}
	if c.MaxRequestBytes < c.MaxGenerationBytes {
		add("MaxRequestBytes", "%d: must hold one generation (%d bytes)", c.MaxRequestBytes, c.MaxGenerationBytes)
	}
	if c.Linger < 0 || c.LingerBytes < 0 {
		add("Linger", "%v, LingerBytes %d: must not be negative", c.Linger, c.LingerBytes)
	}
	if c.MaxAttempts < 1 {
		add("MaxAttempts", "%d: must be at least 1", c.MaxAttempts)
	}
	if c.RetryFirst <= 0 || c.RetryMost < c.RetryFirst {
		add("RetryFirst", "%v..%v: must be positive and at most RetryMost", c.RetryFirst, c.RetryMost)
	}
	if c.LeaderWait < 0 {
		add("LeaderWait", "%v: must not be negative", c.LeaderWait)
	}
	if c.Timeout <= 0 {
		add("Timeout", "%v: must be positive", c.Timeout)
	}
	if c.TransactionalID != "" && c.TransactionTimeout <= 0 {
		add("TransactionTimeout", "%v: must be positive", c.TransactionTimeout)
	}
	if !c.Version.IsAtLeast(sarama.V0_11_0_0) {
		add("Version", "%v: record batches need Kafka 0.11 or later", c.Version)
	}
	return errors.Join(errs...)
}

// requestVersion is the produce request version for c.Version.
func (c Config) requestVersion() int16 {
	switch {
	case c.Version.IsAtLeast(sarama.V3_7_0_0):
		return 10
	case c.Version.IsAtLeast(sarama.V2_8_0_0):
		return 9
	case c.Version.IsAtLeast(sarama.V2_4_0_0):
		return 8
	case c.Version.IsAtLeast(sarama.V2_1_0_0):
		return 7
	case c.Version.IsAtLeast(sarama.V2_0_0_0):
		return 6
	case c.Version.IsAtLeast(sarama.V1_0_0_0):
		return 5
	}
	return 3
}

// Package dlq owns EventForge's dead-letter records: building them from a
// consumed record the worker gives up on, decoding them back, reading a
// dead-letter topic from its start, and republishing dead letters to their
// original topic.
//
// A dead letter keeps the original key, value, timestamp and headers and adds
// the x-eventforge-* headers of the contract (outbox.HeaderDLQ*). It goes to
// the original topic's name plus outbox.DLQSuffix, in the partition of the
// original (modulo the dead-letter topic's partition count).
//
// Imports (floor: product, the worker's wing): internal/shared/outbox and
// internal/shared/tracing only.
package dlq

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// MaxErrorBytes bounds the error text carried in a dead letter's header.
const MaxErrorBytes = 2048

// headerPrefix starts every header the dead-letter path adds.
const headerPrefix = "x-eventforge-"

// HeaderReplay marks a record that Republish put back on its original
// topic; its value is the dead letter's position (topic/partition@offset).
// The worker's inbox applies such a record once although the event was
// dead-lettered; without it a copy of a dead-lettered event is a duplicate.
const HeaderReplay = headerPrefix + "replay"

// Topic is the dead-letter topic of topic.
func Topic(topic string) string { return topic + outbox.DLQSuffix }

// Info is what the worker records about why it gave up on a record.
type Info struct {
	Error    string // the last failure
	Attempts int    // attempts made in all
	Consumer string // the inbox consumer name of the worker
	// Trace is the span context of the worker's process span: when valid,
	// the dead letter's traceparent (and tracestate) name it, so the
	// letter and a replay of it stay in the event's trace.
	Trace trace.SpanContext
}

// Message builds the dead letter of m. Its Partition field holds the
// original partition for a partitioner that keeps it (see the worker).
func Message(m *sarama.ConsumerMessage, info Info) *sarama.ProducerMessage {
	hs := make([]sarama.RecordHeader, 0, len(m.Headers)+6)
	for _, h := range m.Headers {
		if h != nil && !isOwnHeader(h.Key) {
			hs = append(hs, *h)
		}
	}
	hs = append(hs,
		header(outbox.HeaderDLQError, truncate(info.Error, MaxErrorBytes)),
		header(outbox.HeaderDLQAttempts, strconv.Itoa(info.Attempts)),
		header(outbox.HeaderDLQOriginalTopic, m.Topic),
		header(outbox.HeaderDLQOriginalPartition, strconv.FormatInt(int64(m.Partition), 10)),
		header(outbox.HeaderDLQOriginalOffset, strconv.FormatInt(m.Offset, 10)),
		header(outbox.HeaderDLQConsumer, info.Consumer),
	)
	hs = tracing.SetRecordHeaders(hs, info.Trace)
	pm := &sarama.ProducerMessage{
		Topic:     Topic(m.Topic),
		Headers:   hs,
		Timestamp: m.Timestamp,
		Partition: m.Partition,
	}
	// A nil key stays nil: a keyless original must not gain an empty key.
	if m.Key != nil {
		pm.Key = sarama.ByteEncoder(m.Key)
	}
	if m.Value != nil {
		pm.Value = sarama.ByteEncoder(m.Value)
	}
	return pm
}

// Letter is one decoded dead letter.
type Letter struct {
	Topic     string // the dead-letter topic
	Partition int32  // position in the dead-letter topic
	Offset    int64
	Timestamp time.Time

	// EventID is the event_id header of the original, as found; empty when
	// it had none. ValidID reports whether it is a UUID.
	EventID string
	ValidID bool

	Error             string
	Attempts          int
	OriginalTopic     string
	OriginalPartition int32
	OriginalOffset    int64
	Consumer          string

	Key, Value []byte
	// Headers are the original's headers: the x-eventforge-* ones removed.
	Headers []sarama.RecordHeader
}

// Decode reads a dead letter from a consumed record. Missing or unreadable
// position headers decode as -1; Decode never fails, so a listing shows
// every record, even a foreign one.
func Decode(m *sarama.ConsumerMessage) Letter {
	l := Letter{
		Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp,
		Key: m.Key, Value: m.Value,
		Attempts: -1, OriginalPartition: -1, OriginalOffset: -1,
	}
	l.EventID, _ = outbox.EventIDHeader(m.Headers) // event_id, ce_id or id
	for _, h := range m.Headers {
		if h == nil {
			continue
		}
		v := string(h.Value)
		switch string(h.Key) {
		case outbox.HeaderDLQError:
			l.Error = v
		case outbox.HeaderDLQAttempts:
			l.Attempts = int(atoi(v, 32))
		case outbox.HeaderDLQOriginalTopic:
			l.OriginalTopic = v
		case outbox.HeaderDLQOriginalPartition:
			l.OriginalPartition = int32(atoi(v, 32))
		case outbox.HeaderDLQOriginalOffset:
			l.OriginalOffset = atoi(v, 64)
		case outbox.HeaderDLQConsumer:
			l.Consumer = v
		}
		if !isOwnHeader(h.Key) {
			l.Headers = append(l.Headers, *h)
		}
	}
	if id, err := uuid.Parse(l.EventID); err == nil {
		l.ValidID = true
		l.EventID = id.String()
	}
	return l
}

// Destination is the topic a replay of l writes to: the dead-letter topic's
// own name less outbox.DLQSuffix ("orders.dlq" → "orders"), never the
// x-eventforge-original-topic header, which whoever wrote the record chose.
// Empty when the topic is no dead-letter topic.
func (l Letter) Destination() string {
	if !strings.HasSuffix(l.Topic, outbox.DLQSuffix) {
		return ""
	}
	return strings.TrimSuffix(l.Topic, outbox.DLQSuffix)
}

// Republish is the record that puts l back on its original topic
// (Destination): the original key, value, timestamp and headers (so the
// same event_id), without the dead-letter headers, plus HeaderReplay. The
// caller's producer partitions it by key, as the relay did.
func (l Letter) Republish() *sarama.ProducerMessage {
	hs := make([]sarama.RecordHeader, 0, len(l.Headers)+1)
	hs = append(hs, l.Headers...)
	hs = append(hs, header(HeaderReplay, fmt.Sprintf("%s/%d@%d", l.Topic, l.Partition, l.Offset)))
	pm := &sarama.ProducerMessage{
		Topic:     l.Destination(),
		Headers:   hs,
		Timestamp: l.Timestamp,
	}
	if l.Key != nil {
		pm.Key = sarama.ByteEncoder(l.Key)
	}
	if l.Value != nil {
		pm.Value = sarama.ByteEncoder(l.Value)
	}
	return pm
}

// isOwnHeader reports a header of the dead-letter path, in any case (an
// outbox writer's forged "X-EventForge-…" is dropped too).
func isOwnHeader(key []byte) bool {
	return len(key) >= len(headerPrefix) && bytes.EqualFold(key[:len(headerPrefix)], []byte(headerPrefix))
}

func header(k, v string) sarama.RecordHeader {
	return sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}
}

func atoi(s string, bits int) int64 {
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return -1
	}
	return n
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

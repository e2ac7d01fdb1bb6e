// Package outbox defines an outbox event and its Kafka message format, the one
// piece of the contract that the relay (which writes it) and the workers and
// admin commands (which read it) must agree on byte for byte.
//
// Imports (floor: shared library): no other EventForge package.
package outbox

import (
	"time"

	"github.com/google/uuid"
)

// Kafka header names fixed by the contract.
const (
	HeaderEventID       = "event_id"
	HeaderEventType     = "event_type"
	HeaderAggregateType = "aggregate_type"
)

// W3C Trace Context header names. An outbox row's headers column may carry
// them (the API writes them from its request); the relay and the worker log
// the traceparent, so one trace id follows an event end to end.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// ReservedHeaderPrefix starts every header name that only EventForge's own
// paths write: the dead-letter headers below and dlq replay's
// x-eventforge-replay. An outbox row may not carry one (CheckHeaders).
const ReservedHeaderPrefix = "x-eventforge-"

// Dead-letter header names fixed by the contract.
const (
	HeaderDLQError             = "x-eventforge-error"
	HeaderDLQAttempts          = "x-eventforge-attempts"
	HeaderDLQOriginalTopic     = "x-eventforge-original-topic"
	HeaderDLQOriginalPartition = "x-eventforge-original-partition"
	HeaderDLQOriginalOffset    = "x-eventforge-original-offset"
	HeaderDLQConsumer          = "x-eventforge-consumer"
)

// DLQSuffix is appended to a topic's name to name its dead-letter topic.
const DLQSuffix = ".dlq"

// Event is one committed outbox row.
type Event struct {
	ID            uuid.UUID
	AggregateType string // routes to the Kafka topic
	AggregateID   string // the Kafka key
	EventType     string
	Payload       []byte            // JSON text, other text, or bytes: see PayloadKind
	PayloadKind   PayloadKind       // what Payload holds; zero: JSON
	JSONChecked   bool              // a JSON payload the server validated (a json or jsonb column): compacted without a second check
	NoPayload     bool              // a NULL payload under the tombstone policy: a record without a value
	Headers       map[string]string // the string entries of the headers column
	CommitTime    time.Time         // the transaction's commit time; zero when unknown
}

// Topic is the Kafka topic the event goes to: the aggregate type behind an
// optional prefix.
func (e *Event) Topic(prefix string) string { return prefix + e.AggregateType }

// PayloadKind says what an event's payload holds, from the payload column's
// type.
type PayloadKind uint8

// Payload kinds.
const (
	PayloadJSON   PayloadKind = iota // json or jsonb: compacted JSON text
	PayloadText                      // text or varchar: produced as is
	PayloadBinary                    // bytea: produced byte for byte
)

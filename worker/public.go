package worker

import "github.com/eventforge/eventforge/internal/shared/outbox"

// OutboxEvent is the decoded outbox record an Event embeds: ID, the
// aggregate's type (the topic) and id (the key), EventType, Payload and its
// PayloadKind, Headers and CommitTime. A program outside this module builds
// an Event with it, for instance to test a Handler:
//
//	worker.Event{Event: worker.OutboxEvent{EventType: "order.created"}}
type OutboxEvent = outbox.Event

// PayloadKind says what an event's Payload holds.
type PayloadKind = outbox.PayloadKind

// Payload kinds of an OutboxEvent.
const (
	PayloadJSON   = outbox.PayloadJSON   // json or jsonb: compacted JSON text
	PayloadText   = outbox.PayloadText   // text or varchar: as written
	PayloadBinary = outbox.PayloadBinary // bytea: byte for byte
)

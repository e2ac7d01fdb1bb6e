// Package worker applies EventForge events from Kafka to PostgreSQL exactly
// once in effect, with the inbox pattern (docs/design.md#inbox, #offsets-forward, #bounded-retries).
//
// A Runner is a member of a Kafka consumer group. For each event it opens one
// transaction, inserts the event's row into processed_events (consumer,
// event_id) with ON CONFLICT DO NOTHING, runs the Handler only when that row
// is new, and commits; only then does it mark the offset, and marked offsets
// are committed to Kafka. A crash at any point therefore delivers the event
// again, and the inbox row makes the second delivery a counted duplicate
// without effect. New groups start at the oldest offset.
//
// Each claimed partition is applied in offset order by one goroutine. With
// Config.BatchSize > 1 a run of messages that have already arrived is applied
// in one transaction; when it fails, the run is redone one event at a time,
// so a poison event cannot take its neighbours with it.
//
// Failures are retried in place while the partition waits, so per-key order
// holds: transient ones (serialization failures, deadlocks, a handler's
// Transient, and anything unclassified) up to MaxAttempts attempts and
// MaxRetryTime; a database that cannot be reached (also by timeout), is out
// of resources or shutting down, or lacks a table or column, until it works
// again, without spending attempts, since dead-lettering would then drain
// the topic. Each such outage logs one line when it begins and one when it
// ends, and Ready reports it. Permanent failures (Permanent, bad data, bad
// SQL) and exhausted retries go to the dead-letter topic <topic>.dlq (package
// dlq has the format), acked by all in-sync replicas before the original
// offset moves, and then recorded in the inbox (result 'dlq'), so a copy of
// the event is a duplicate; a record republished by dlq replay applies it
// once. Malformed records go there at once. The worker offers no retry
// topics: they would reorder a key's events.
//
// Rebalances use the eager sticky strategy: when the group rebalances each
// claim loop finishes the transaction in flight, the session commits what
// was marked, and the partitions move.
//
// Handlers are Go code (Handler, HandlerFunc) or SQL statements from a YAML
// file (package sqlhandler).
package worker

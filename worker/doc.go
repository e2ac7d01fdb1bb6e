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
// holds. Evidence, not the type of an error, decides what a failure is.
// After a failed apply the Runner probes the database on its own pool: one
// that is unreachable, read-only or refuses the inbox insert makes the
// partition wait without spending attempts (dead-lettering would drain the
// topic), and so do a missing schema object (table, column, schema,
// function, type) and a handler's DependencyUnavailable. Each such outage
// logs one line when it begins and one when it ends, and Ready reports it.
// Otherwise the failure is the event's: retried up to MaxAttempts attempts
// and MaxRetryTime (at once spent for bad data, bad SQL or a refused row),
// then dead-lettered, unless the events behind it in its partition, tried
// in transactions that are rolled back, fail with the same cause: as many
// consecutive distinct events as OutageEvents failing alike are an outage
// of something the handler needs, and the partition waits for it instead.
// A handler's Permanent and malformed records go to the dead-letter topic at
// once. Dead letters go to <topic>.dlq (package dlq has the format), acked
// by all in-sync replicas before the original offset moves, and are then
// recorded in the inbox (result 'dlq'), so a copy of the event is a
// duplicate; a record republished by dlq replay applies it once. The worker
// offers no retry topics: they would reorder a key's events.
//
// Rebalances use the eager sticky strategy: when the group rebalances each
// claim loop finishes the transaction in flight, the session commits what
// was marked, and the partitions move.
//
// Handlers are Go code (Handler, HandlerFunc) or SQL statements from a YAML
// file (package sqlhandler).
//
// Imports (floor: product, the worker): shared libraries and its own
// worker/dlq and worker/kafkaconf; never cdc, api or the tools.
package worker

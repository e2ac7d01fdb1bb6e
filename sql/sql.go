// Package sql holds EventForge's schema as ordered migration files, embedded
// in the binary. A file once released is never edited, only followed by a new
// one; its version is its file name without .sql, unique across the sets and
// recorded in schema_migrations. The sets:
//
//   - migrations/: the pipeline (outbox, processed_events, the publication).
//     New pipeline migrations go here, numbered after the last file of any set.
//   - relay/: the relay's own tables (relay_state, outbox_rejected), applied
//     also to a database whose application owns its outbox.
//   - demo/: the demo's tables (orders, api_idempotency), applied only by
//     `eventforge migrate --demo`.
//
// Within one run every selected file applies in version order.
//
// Imports (floor: shared library): no other EventForge package.
package sql

import "embed"

// Migrations holds migrations/, relay/ and demo/ (NNNN_name.sql files).
//
//go:embed migrations/*.sql relay/*.sql demo/*.sql
var Migrations embed.FS

// Set directories inside Migrations.
const (
	PipelineDir = "migrations"
	RelayDir    = "relay"
	DemoDir     = "demo"
)

// Package sql holds EventForge's schema as ordered migration files, embedded
// in the binary. File names sort in the order they apply; a file once released
// is never edited, only followed by a new one.
package sql

import "embed"

// Migrations holds migrations/NNNN_name.sql.
//
//go:embed migrations/*.sql
var Migrations embed.FS

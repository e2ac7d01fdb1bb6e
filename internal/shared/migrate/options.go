package migrate

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Defaults of Options, the same as `cdc run`'s --outbox-table and
// --publication.
const (
	DefaultOutboxTable = "public.outbox"
	DefaultPublication = "eventforge_outbox"
)

// Options chooses what Run creates.
type Options struct {
	// Demo adds the demo's tables, orders and api_idempotency, that `api run`
	// and deploy/handlers/orders.yaml use. Default false.
	Demo bool
	// OutboxTable is the table the publication covers, "schema.table" or
	// "table" (schema public). Default "" or DefaultOutboxTable: migrate
	// creates the contract's outbox and the workers' processed_events. Any
	// other table is the application's own: it must exist already, and
	// migrate creates only the relay's tables and the publication.
	OutboxTable string
	// Publication is the publication of the outbox. Default
	// DefaultPublication. An existing publication must cover OutboxTable.
	Publication string
}

// identifier is a plain PostgreSQL identifier as migrate accepts it: quoted
// identifiers with other characters are refused rather than guessed at.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// Validate reports every option that cannot work.
func (o Options) Validate() error {
	var errs []error
	schema, table := o.split()
	if !identifier.MatchString(schema) || !identifier.MatchString(table) || strings.Count(o.outboxTable(), ".") > 1 {
		errs = append(errs, fmt.Errorf("invalid --outbox-table %q: want table or schema.table of letters, digits and _", o.OutboxTable))
	}
	if !identifier.MatchString(o.publication()) {
		errs = append(errs, fmt.Errorf("invalid --publication %q: want letters, digits and _", o.Publication))
	}
	return errors.Join(errs...)
}

// outboxTable is OutboxTable as schema.table, the default when empty.
func (o Options) outboxTable() string {
	s, t := o.split()
	return s + "." + t
}

func (o Options) split() (schema, table string) {
	v := o.OutboxTable
	if v == "" {
		v = DefaultOutboxTable
	}
	schema, table, ok := strings.Cut(v, ".")
	if !ok {
		return "public", v
	}
	return schema, table
}

// ownOutbox reports whether the outbox is the application's own table.
func (o Options) ownOutbox() bool { return o.outboxTable() != DefaultOutboxTable }

func (o Options) publication() string {
	if o.Publication == "" {
		return DefaultPublication
	}
	return o.Publication
}

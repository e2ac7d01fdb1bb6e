package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs a query: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// supported lists the column types each role accepts (pg_type.typname of
// the column's type, or of a domain's base type).
var supported = map[string][]string{
	"event id":   {"uuid", "text", "varchar"},
	"topic":      {"text", "varchar", "bpchar"},
	"key":        {"text", "varchar", "bpchar", "uuid", "int2", "int4", "int8", "numeric"},
	"event type": {"text", "varchar", "bpchar"},
	"payload":    {"jsonb", "json", "text", "varchar", "bytea"},
	"headers":    {"jsonb", "json"},
	"created at": {"timestamptz", "timestamp"},
}

// ErrMapping wraps every problem Check finds between the mapping and the
// table: a missing table or column, an unsupported column type.
var ErrMapping = errors.New("the outbox mapping does not match the database")

// Catalog is a mapping checked against the database: the column types it
// found. Use it to read outbox rows with SQL (SelectList, Scan).
type Catalog struct {
	Mapping
	Types   map[string]string // column -> type name
	NotNull map[string]bool   // column -> NOT NULL
	extras  []Extra
}

// tableOID finds the table by its schema and name in the catalog, which
// every role may read (to_regclass would need USAGE on the schema).
const tableOID = `SELECT coalesce((SELECT c.oid::int8 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')), 0)`

// columnTypes reads the columns of a table.
const columnTypes = `SELECT a.attname::text, coalesce(bt.typname, t.typname)::text, a.attnotnull
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
WHERE a.attrelid = $1::int8::oid AND a.attnum > 0 AND NOT a.attisdropped`

// Check validates m and checks it against the catalog: the table exists and
// every mapped column exists with a supported type. It reports every
// problem, one clause each.
func (m Mapping) Check(ctx context.Context, q Querier) (*Catalog, error) {
	m = m.normal()
	if err := m.Validate(); err != nil {
		return nil, err
	}
	extras, _ := m.Extras()
	schema, table, _ := m.SplitTable()
	var oid int64
	rows, err := q.Query(ctx, tableOID, schema, table)
	if err == nil {
		oid, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
	}
	if err != nil {
		return nil, fmt.Errorf("read outbox table %s: %w", m.Table, err)
	}
	if oid == 0 {
		return nil, fmt.Errorf("%w: outbox table %s does not exist: create it or set --outbox-table", ErrMapping, m.Table)
	}
	rows, err = q.Query(ctx, columnTypes, oid)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", m.Table, err)
	}
	types, notNull := map[string]string{}, map[string]bool{}
	var name, typ string
	var nn bool
	_, err = pgx.ForEachRow(rows, []any{&name, &typ, &nn}, func() error { types[name], notNull[name] = typ, nn; return nil })
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", m.Table, err)
	}
	c := &Catalog{Mapping: m, Types: types, NotNull: notNull, extras: extras}
	c.Mapping.cols = &ColumnSchemas{
		Payload:     Column{Type: types[m.Payload], NotNull: notNull[m.Payload]},
		Key:         Column{Type: types[m.Key], NotNull: notNull[m.Key]},
		PayloadName: m.Payload,
	}
	return c, c.problems()
}

// problems lists every mapped column that is missing or of a type its role
// does not support.
func (c *Catalog) problems() error {
	var errs []error
	for _, r := range c.columns() {
		if r.col == "" {
			continue
		}
		typ, ok := c.Types[r.col]
		if !ok {
			errs = append(errs, fmt.Errorf("outbox table %s has no column %q (the %s column): set its flag or create it", c.Table, r.col, r.role))
			continue
		}
		if want := supported[r.role]; !contains(want, typ) {
			errs = append(errs, fmt.Errorf("column %q of %s (the %s column) has type %s: want %s", r.col, c.Table, r.role, typ, strings.Join(want, ", ")))
		}
	}
	if _, err := NewKeyConverter(c.KeyConverter, c.ColumnSchemas()); err != nil && c.Types[c.Key] != "" {
		errs = append(errs, fmt.Errorf("column %q of %s (the key column): %w", c.Key, c.Table, err))
	}
	for _, x := range c.extras {
		if _, ok := c.Types[x.Column]; !ok {
			errs = append(errs, fmt.Errorf("outbox table %s has no column %q (extra header %s)", c.Table, x.Column, x.Header))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%d problems): %w", ErrMapping, len(errs), problems(errs))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// KindOf maps a payload column's type name to the payload kind.
func KindOf(typ string) PayloadKind {
	switch typ {
	case "bytea":
		return PayloadBinary
	case "text", "varchar", "bpchar":
		return PayloadText
	}
	return PayloadJSON
}

// SelectList is the column list that reads outbox rows for Scan, in this
// order: event id, topic, key, event type, payload, headers, created at,
// then the extra header columns. Use it as
//
//	"SELECT " + c.SelectList() + " FROM " + c.QuotedTable() + " WHERE …"
//
// and order or bound by c.CreatedAtColumn().
func (c *Catalog) SelectList() string {
	text := func(col, null string) string {
		if col == "" {
			return null
		}
		return pgx.Identifier{col}.Sanitize() + "::text"
	}
	payload := text(c.Payload, "")
	if KindOf(c.Types[c.Payload]) == PayloadBinary {
		payload = pgx.Identifier{c.Payload}.Sanitize()
	}
	created := "NULL::timestamptz"
	if c.CreatedAt != "" {
		created = pgx.Identifier{c.CreatedAt}.Sanitize() + "::timestamptz"
	}
	cols := []string{
		text(c.EventID, ""), text(c.Topic, ""), text(c.Key, ""), text(c.EventType, "NULL::text"),
		payload, text(c.Headers, "NULL::text"), created,
	}
	for _, x := range c.extras {
		cols = append(cols, text(x.Column, ""))
	}
	return strings.Join(cols, ", ")
}

// CreatedAtColumn is the quoted created-at column, or an error naming the
// command that needs it when the mapping has none.
func (c *Catalog) CreatedAtColumn(command string) (string, error) {
	if c.CreatedAt == "" {
		return "", fmt.Errorf("%s needs a created-at column of the outbox (timestamptz): set --outbox-column-created-at", command)
	}
	return pgx.Identifier{c.CreatedAt}.Sanitize(), nil
}

// Row is one outbox row read with SelectList.
type Row struct {
	Event     Event
	CreatedAt time.Time // zero without a created-at column
	// Problem is why the row cannot become a record (a bad headers value,
	// an event id that is not a UUID, a NULL payload under the reject
	// policy), with the column: the relay records such rows in
	// outbox_rejected. Empty when the row is fine.
	Problem string
}

// Scan reads the current row of rows, selected with SelectList.
func (c *Catalog) Scan(rows pgx.Rows) (Row, error) {
	var (
		id, topic, key   string
		typ, headers     *string
		payload          []byte
		created          *time.Time
		r                Row
		extras           = make([]*string, len(c.extras))
		dest             = []any{&id, &topic, &key, &typ, &payload, &headers, &created}
		kind             = KindOf(c.Types[c.Payload])
		noteProblem      = func(col, reason string) { r.Problem = fmt.Sprintf("column %s: %s", col, reason) }
		headersAndExtras map[string]string
	)
	for i := range extras {
		dest = append(dest, &extras[i])
	}
	if err := rows.Scan(dest...); err != nil {
		return r, fmt.Errorf("read outbox row: %w", err)
	}
	if err := r.Event.ID.UnmarshalText([]byte(id)); err != nil {
		noteProblem(c.EventID, fmt.Sprintf("%q is not a UUID", id))
	}
	r.Event.AggregateType, r.Event.AggregateID = topic, key
	if typ != nil {
		r.Event.EventType = *typ
	}
	r.Event.Payload, r.Event.PayloadKind = payload, kind
	r.Event.JSONChecked = kind == PayloadJSON && CheckedJSON(c.Types[c.Payload])
	if payload == nil {
		if c.NullPayload == NullPayloadTombstone {
			r.Event.NoPayload = true
		} else {
			noteProblem(c.Payload, "value is NULL")
		}
	}
	if headers != nil {
		hs, err := StringHeaders([]byte(*headers))
		if err != nil {
			noteProblem(c.Headers, err.Error())
		}
		headersAndExtras = hs
	}
	for i, x := range c.extras {
		if extras[i] == nil {
			continue
		}
		if headersAndExtras == nil {
			headersAndExtras = map[string]string{}
		}
		headersAndExtras[x.Header] = *extras[i]
	}
	r.Event.Headers = headersAndExtras
	if created != nil {
		r.CreatedAt = *created
		r.Event.CommitTime = *created
	}
	return r, nil
}

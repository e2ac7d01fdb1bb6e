// Package sqlhandler lets a worker apply events without Go: a YAML file maps
// each event type to one SQL statement, run inside the inbox transaction
// with these parameters:
//
//	$1 aggregate_id (text)   $2 payload (jsonb)   $3 event_id (uuid)
//	$4 event_type (text)     $5 headers (jsonb, the event's string headers)
//
// A statement may use any of them (cast where the column type differs, e.g.
// $1::bigint). expect_rows (default 1) is the least number of rows it must
// affect; fewer rolls the transaction back and fails the event, which is
// then retried and dead-lettered like any transient failure: the row it
// needs may not exist yet. Event types without a handler are skipped
// (recorded in the inbox, counted as skipped) or, with "unknown: dlq",
// dead-lettered at once.
//
//	unknown: skip
//	handlers:
//	  order.created:
//	    sql: UPDATE orders SET status = 'processed', updated_at = now() WHERE id = $1
//	    expect_rows: 1
//	    batch_sql: >
//	      UPDATE orders o SET status = 'processed', updated_at = now()
//	      FROM unnest($1::text[]) AS e(id) WHERE o.id = e.id
//	      RETURNING e.id
//
// Statements are prepared once per connection. In batch mode the statements
// of a batch's events are pipelined in one round trip. batch_sql, optional,
// is the set-based form of sql: the same five parameters as arrays, one
// element per event in offset order ($1 text[], $2 jsonb[], $3 uuid[],
// $4 text[], $5 jsonb[]). It must have the effect of running sql for each
// event in turn. The worker uses it for consecutive events of the type,
// never giving it the same aggregate twice (a repeat starts a new
// statement), so every aggregate's events still apply in order.
//
// expect_rows holds for each event in batch mode too, so when it is above 0
// batch_sql must return one row per row it changes whose first column is
// the aggregate id as given in $1 (RETURNING e.id above); a statement that
// returns nothing is refused at start-up. An event with fewer rows than
// expect_rows, or a returned id that is no event's aggregate, fails the
// batch, which is then redone one event at a time with sql.
//
// Imports (floor: product, the worker's wing): worker only.
package sqlhandler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Unknown-event policies.
const (
	UnknownSkip = "skip" // record in the inbox without effect
	UnknownDLQ  = "dlq"  // dead-letter at once
)

// Spec is a parsed handlers file.
type Spec struct {
	Unknown  string               `yaml:"unknown"`
	Handlers map[string]Statement `yaml:"handlers"`
}

// Statement is the SQL run for one event type.
type Statement struct {
	SQL        string `yaml:"sql"`
	ExpectRows *int   `yaml:"expect_rows"` // nil: 1
	// BatchSQL is the optional set-based form of SQL (see the package doc).
	BatchSQL string `yaml:"batch_sql"`
}

// MinRows is the least number of rows the statement must affect.
func (s Statement) MinRows() int {
	if s.ExpectRows == nil {
		return 1
	}
	return *s.ExpectRows
}

// Load reads and parses the handlers file at path.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read handlers file: %w", err)
	}
	spec, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("handlers file %s: %w", path, err)
	}
	return spec, nil
}

// Parse reads a handlers file strictly: unknown keys, duplicate keys and
// more than one YAML document are errors, and so is every invalid value.
func Parse(data []byte) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var spec Spec
	if err := dec.Decode(&spec); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty handlers file")
		}
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse YAML: more than one document")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Unknown == "" {
		spec.Unknown = UnknownSkip
	}
	return &spec, nil
}

// Validate checks the values of a spec; each error names its event type.
func (s *Spec) Validate() error {
	var errs []error
	switch s.Unknown {
	case "", UnknownSkip, UnknownDLQ:
	default:
		errs = append(errs, fmt.Errorf("unknown: %q is not %q or %q", s.Unknown, UnknownSkip, UnknownDLQ))
	}
	if len(s.Handlers) == 0 {
		errs = append(errs, errors.New("no handlers: map at least one event type under handlers"))
	}
	for _, typ := range s.EventTypes() {
		st := s.Handlers[typ]
		switch {
		case strings.TrimSpace(typ) == "":
			errs = append(errs, errors.New("handler with an empty event type"))
		case strings.TrimSpace(st.SQL) == "":
			errs = append(errs, fmt.Errorf("handler %q: no sql", typ))
		case st.MinRows() < 0:
			errs = append(errs, fmt.Errorf("handler %q: expect_rows %d is negative", typ, st.MinRows()))
		}
	}
	return errors.Join(errs...)
}

// EventTypes returns the handled event types, sorted.
func (s *Spec) EventTypes() []string {
	types := make([]string, 0, len(s.Handlers))
	for t := range s.Handlers {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

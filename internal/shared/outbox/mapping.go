package outbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
)

// Record formats: how an event becomes a Kafka record.
const (
	// FormatEventForge: the contract's headers event_id, event_type,
	// aggregate_type and the string entries of the headers column.
	FormatEventForge = "eventforge"
	// FormatCloudEvents: CloudEvents' Kafka binary content mode (ce_* headers).
	FormatCloudEvents = "cloudevents"
	// FormatDebezium: what Debezium's outbox event router writes by default:
	// one header, id.
	FormatDebezium = "debezium"
)

// Presets of Mapping.
const (
	PresetEventForge = "eventforge"
	PresetDebezium   = "debezium"
)

// DebeziumTopicPrefix is the fixed part of the Debezium router's default
// route.topic.replacement, outbox.event.${routedByValue}.
const DebeziumTopicPrefix = "outbox.event."

// Mapping says which table holds the outbox, which of its columns play which
// part of an event, and how events become Kafka records. Column names are
// PostgreSQL identifiers as stored (case-sensitive, unquoted). The zero
// value is not usable: start from Preset.
type Mapping struct {
	Table     string `yaml:"table"`      // schema.table or table (schema public); default public.outbox
	EventID   string `yaml:"event_id"`   // uuid, or text holding UUIDs; default event_id
	Topic     string `yaml:"topic"`      // routes to the topic (prefix + value); default aggregate_type
	Key       string `yaml:"key"`        // the Kafka key; default aggregate_id
	EventType string `yaml:"event_type"` // default event_type; empty: none
	Payload   string `yaml:"payload"`    // jsonb, json, text or bytea; default payload
	Headers   string `yaml:"headers"`    // json(b) object of string headers; default headers; empty: none
	// CreatedAt orders and bounds `outbox republish` and `outbox prune`;
	// default created_at; empty: those commands refuse.
	CreatedAt string `yaml:"created_at"`
	// ExtraHeaders are more columns carried as headers, each "column" or
	// "column:header" (Debezium's table.fields.additional.placement
	// column:header:alias, placement header).
	ExtraHeaders []string `yaml:"extra_headers"`
	// TracingSpanContext is the column holding a span context the way
	// Debezium's tracing.span.context.field does: Java properties text
	// (traceparent=…, tracestate=…). The relay's span continues it when the
	// row's headers carry no traceparent. Optional: a table without the
	// column has no such context. Preset debezium: tracingspancontext.
	TracingSpanContext string `yaml:"tracing_span_context"`
	// NullPayload: "reject" (default: the row goes to outbox_rejected) or
	// "tombstone" (a record without a value, as Debezium's router writes).
	NullPayload string `yaml:"null_payload"`

	Format            string `yaml:"record_format"`      // eventforge (default), cloudevents or debezium
	CloudEventsSource string `yaml:"cloudevents_source"` // ce_source; default DefaultCloudEventsSource

	// ValueConverter decides the value's bytes (see NewValueConverter);
	// empty: string for the debezium format, compact for the others.
	ValueConverter string `yaml:"value_converter"`
	// KeyConverter decides the key's bytes: string (default), json or
	// json-schemas.
	KeyConverter string `yaml:"key_converter"`
	// DebeziumLogicalName, when set, adds Debezium's context headers
	// (__debezium.context.*) to debezium-format records, naming this
	// logical name (the connector's topic.prefix).
	DebeziumLogicalName string `yaml:"debezium_logical_name"`
	// DebeziumConnectorName is the __debezium.context.connectorName
	// header; default DefaultDebeziumConnectorName.
	DebeziumConnectorName string `yaml:"debezium_connector_name"`

	// ValueEncoder, when set, decides the value's bytes instead of
	// ValueConverter: a converter built at start-up that needs more than
	// the mapping, such as a schema registry's encoder. Not a file setting.
	ValueEncoder ValueConverter `yaml:"-"`

	// cols are the payload and key columns as Check found them.
	cols *ColumnSchemas
}

// Null payload policies of Mapping.NullPayload.
const (
	NullPayloadReject    = "reject"
	NullPayloadTombstone = "tombstone"
)

// DebeziumTracingSpanContext is the span context column of Debezium's
// outbox table (its router's tracing.span.context.field default).
const DebeziumTracingSpanContext = "tracingspancontext"

// DefaultCloudEventsSource is ce_source when none is configured.
const DefaultCloudEventsSource = "/eventforge"

// Preset returns the mapping of a named preset: "eventforge" (or empty) is
// the contract's outbox table, "debezium" the table Debezium's outbox event
// router reads with its defaults.
func Preset(name string) (Mapping, error) {
	switch name {
	case "", PresetEventForge:
		return Mapping{
			Table: "public.outbox", EventID: "event_id", Topic: "aggregate_type", Key: "aggregate_id",
			EventType: "event_type", Payload: "payload", Headers: "headers", CreatedAt: "created_at",
			NullPayload: NullPayloadReject, Format: FormatEventForge, CloudEventsSource: DefaultCloudEventsSource,
		}, nil
	case PresetDebezium:
		return Mapping{
			Table: "public.outbox", EventID: "id", Topic: "aggregatetype", Key: "aggregateid",
			EventType: "type", Payload: "payload", TracingSpanContext: DebeziumTracingSpanContext,
			NullPayload: NullPayloadTombstone, Format: FormatDebezium, CloudEventsSource: DefaultCloudEventsSource,
		}, nil
	}
	return Mapping{}, fmt.Errorf("invalid --outbox-preset %q: want eventforge or debezium", name)
}

// DefaultMapping is the contract's outbox: Preset("eventforge").
func DefaultMapping() Mapping {
	m, _ := Preset(PresetEventForge)
	return m
}

// File is the YAML file of --outbox-config: a preset plus any of Mapping's
// settings, and the topic prefix.
type File struct {
	Preset      string `yaml:"preset"`
	TopicPrefix string `yaml:"topic_prefix"`
	Mapping     `yaml:",inline"`
}

// ParseFile reads an --outbox-config file. Unknown keys are errors, so a
// typo never silently keeps a default.
func ParseFile(data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return File{}, fmt.Errorf("parse outbox config: %w", err)
	}
	return f, nil
}

// ReadFile reads and parses the --outbox-config file at path.
func ReadFile(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read outbox config: %w", err)
	}
	f, err := ParseFile(b)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Overlay sets every non-empty setting of o on m.
func (m *Mapping) Overlay(o Mapping) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&m.Table, o.Table)
	set(&m.EventID, o.EventID)
	set(&m.Topic, o.Topic)
	set(&m.Key, o.Key)
	set(&m.EventType, o.EventType)
	set(&m.Payload, o.Payload)
	set(&m.Headers, o.Headers)
	set(&m.CreatedAt, o.CreatedAt)
	set(&m.TracingSpanContext, o.TracingSpanContext)
	set(&m.NullPayload, o.NullPayload)
	set(&m.Format, o.Format)
	set(&m.CloudEventsSource, o.CloudEventsSource)
	set(&m.ValueConverter, o.ValueConverter)
	set(&m.KeyConverter, o.KeyConverter)
	set(&m.DebeziumLogicalName, o.DebeziumLogicalName)
	set(&m.DebeziumConnectorName, o.DebeziumConnectorName)
	if o.ExtraHeaders != nil {
		m.ExtraHeaders = o.ExtraHeaders
	}
}

// None is the value that turns an optional column off in a flag or file
// (event_type, headers, created_at).
const None = "-"

// normal is m with None columns cleared.
func (m Mapping) normal() Mapping {
	for _, p := range []*string{&m.EventType, &m.Headers, &m.CreatedAt, &m.TracingSpanContext} {
		if *p == None {
			*p = ""
		}
	}
	return m
}

// Normalize clears the optional columns set to None ("-").
func (m *Mapping) Normalize() { *m = m.normal() }

// SplitTable returns the schema and the table (schema public when none).
func (m *Mapping) SplitTable() (schema, table string, err error) {
	parts := strings.Split(m.Table, ".")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return "public", parts[0], nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("invalid outbox table %q: want table or schema.table", m.Table)
}

// QuotedTable is the table as a quoted SQL identifier, e.g. "public"."outbox".
func (m *Mapping) QuotedTable() string {
	s, t, err := m.SplitTable()
	if err != nil {
		return pgx.Identifier{m.Table}.Sanitize()
	}
	return pgx.Identifier{s, t}.Sanitize()
}

// Extra is one extra column carried as a header.
type Extra struct{ Column, Header string }

// Extras parses ExtraHeaders.
func (m *Mapping) Extras() ([]Extra, error) {
	var out []Extra
	for _, s := range m.ExtraHeaders {
		col, hdr, ok := strings.Cut(strings.TrimSpace(s), ":")
		if !ok {
			hdr = col
		}
		if col == "" || hdr == "" || strings.Contains(hdr, ":") {
			return nil, fmt.Errorf("invalid extra header %q: want column or column:header", s)
		}
		if err := CheckHeaders(map[string]string{hdr: ""}); err != nil {
			return nil, fmt.Errorf("invalid extra header %q: %w", s, err)
		}
		out = append(out, Extra{Column: col, Header: hdr})
	}
	return out, nil
}

// Validate reports every problem of the mapping itself (not against the
// catalog: see Check), one clause each, separated by "; ".
func (m Mapping) Validate() error {
	m = m.normal()
	var errs []error
	if _, _, err := m.SplitTable(); err != nil {
		errs = append(errs, err)
	}
	for _, c := range []struct{ role, col string }{
		{"event id", m.EventID}, {"topic", m.Topic}, {"key", m.Key}, {"payload", m.Payload},
	} {
		if c.col == "" {
			errs = append(errs, fmt.Errorf("no %s column: it is required", c.role))
		}
	}
	seen := map[string]string{}
	for _, c := range m.columns() {
		if c.col == "" {
			continue
		}
		if other, ok := seen[c.col]; ok && other != c.role {
			errs = append(errs, fmt.Errorf("column %q is mapped twice: as %s and as %s", c.col, other, c.role))
		}
		seen[c.col] = c.role
	}
	if _, err := m.Extras(); err != nil {
		errs = append(errs, err)
	}
	switch m.NullPayload {
	case "", NullPayloadReject, NullPayloadTombstone:
	default:
		errs = append(errs, fmt.Errorf("invalid null payload policy %q: want reject or tombstone", m.NullPayload))
	}
	switch m.Format {
	case "", FormatEventForge, FormatDebezium:
	case FormatCloudEvents:
		if m.EventType == "" {
			errs = append(errs, errors.New("record format cloudevents needs an event type column (ce_type is required)"))
		}
		if m.CloudEventsSource == "" {
			errs = append(errs, errors.New("record format cloudevents needs a non-empty --cloudevents-source"))
		}
	default:
		errs = append(errs, fmt.Errorf("invalid --record-format %q: want eventforge, cloudevents or debezium", m.Format))
	}
	errs = append(errs, m.converterProblems()...)
	return joinProblems(errs)
}

// converterProblems checks the converter names and the context headers.
func (m Mapping) converterProblems() []error {
	var errs []error
	if !contains(append([]string{""}, valueConverters...), m.ValueConverter) {
		errs = append(errs, fmt.Errorf("invalid --value-converter %q: want %s", m.ValueConverter, strings.Join(valueConverters, ", ")))
	}
	if !contains(append([]string{""}, keyConverters...), m.KeyConverter) {
		errs = append(errs, fmt.Errorf("invalid --key-converter %q: want %s", m.KeyConverter, strings.Join(keyConverters, ", ")))
	}
	if m.DebeziumLogicalName != "" && m.Format != FormatDebezium {
		errs = append(errs, fmt.Errorf("--debezium-logical-name adds Debezium's context headers, which only the debezium record format writes (the format is %q)", m.Format))
	}
	return errs
}

// EffectiveValueConverter is the value converter in use: the configured
// one, else string for the debezium record format (PostgreSQL's text of the
// payload, as Debezium's router writes it with StringConverter) and compact
// (the contract's) for the others.
func (m *Mapping) EffectiveValueConverter() string {
	switch {
	case m.ValueConverter != "":
		return m.ValueConverter
	case m.Format == FormatDebezium:
		return ConverterString
	}
	return ConverterCompact
}

// ColumnSchemas are the payload and key columns as Check found them, or
// Debezium's example outbox's when the mapping was not checked.
func (m *Mapping) ColumnSchemas() ColumnSchemas {
	if m.cols != nil {
		return *m.cols
	}
	c := defaultColumns
	c.PayloadName = m.Payload
	return c
}

// DefaultDebeziumConnectorName is the __debezium.context.connectorName
// header Debezium's PostgreSQL connector writes.
const DefaultDebeziumConnectorName = "postgresql"

// Debezium's context header names and the task id its PostgreSQL
// connector (one task) writes.
const (
	HeaderDebeziumLogicalName   = "__debezium.context.connectorLogicalName"
	HeaderDebeziumTaskID        = "__debezium.context.taskId"
	HeaderDebeziumConnectorName = "__debezium.context.connectorName"
	HeaderDebeziumRunID         = "__debezium.context.runId"
	debeziumTaskID              = "0"
)

// runID is this process's __debezium.context.runId: Debezium draws one
// each time its task starts.
var runID = uuid.NewString()

// contextHeaders are Debezium's context headers, in the order the
// connector adds them, or none without a logical name.
func (m *Mapping) contextHeaders() []sarama.RecordHeader {
	if m.DebeziumLogicalName == "" {
		return nil
	}
	name := m.DebeziumConnectorName
	if name == "" {
		name = DefaultDebeziumConnectorName
	}
	return []sarama.RecordHeader{
		header(HeaderDebeziumLogicalName, m.DebeziumLogicalName),
		header(HeaderDebeziumTaskID, debeziumTaskID),
		header(HeaderDebeziumConnectorName, name),
		header(HeaderDebeziumRunID, runID),
	}
}

// isDebeziumHeader: names under Debezium's own prefix, which an extra
// header column may not set on a debezium-format record.
func isDebeziumHeader(k string) bool { return strings.HasPrefix(k, "__debezium.") }

// problems are several errors reported at once, on one line (the command
// line prints an error on one), one clause each.
type problems []error

func (p problems) Error() string {
	msgs := make([]string, len(p))
	for i, e := range p {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

func (p problems) Unwrap() []error { return p }

// joinProblems is nil without errors, the error itself for one, else all.
func joinProblems(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return problems(errs)
}

// role is one column's part in an event.
type role struct{ role, col string }

// columns lists the single-column roles (not the extra headers).
func (m Mapping) columns() []role {
	return []role{
		{"event id", m.EventID}, {"topic", m.Topic}, {"key", m.Key}, {"event type", m.EventType},
		{"payload", m.Payload}, {"headers", m.Headers}, {"created at", m.CreatedAt},
	}
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// mappingFlags name the outbox table, its columns and the record format:
// shared by every command that reads the outbox. A flag (or its variable)
// beats the --outbox-config file, which beats the preset's defaults.
type mappingFlags struct {
	file, preset string
	set          outbox.Mapping // the values of the flags; applied when Changed
	relay        bool           // the record format flags are registered
}

// columnFlags are the column flags, each with the field of a Mapping it sets.
var columnFlags = []struct {
	name, usage string
	field       func(*outbox.Mapping) *string
}{
	{"outbox-column-event-id", "outbox column of the event id: uuid, or text holding UUIDs (preset debezium: id)",
		func(m *outbox.Mapping) *string { return &m.EventID }},
	{"outbox-column-topic", "outbox column whose value routes the event: topic = --topic-prefix + value (preset debezium: aggregatetype)",
		func(m *outbox.Mapping) *string { return &m.Topic }},
	{"outbox-column-key", "outbox column of the Kafka key (preset debezium: aggregateid)",
		func(m *outbox.Mapping) *string { return &m.Key }},
	{"outbox-column-event-type", "outbox column of the event type; - for none (preset debezium: type, read but not written, as the router does)",
		func(m *outbox.Mapping) *string { return &m.EventType }},
	{"outbox-column-payload", "outbox column of the Kafka value: jsonb, json, text or bytea (written as --value-converter says)",
		func(m *outbox.Mapping) *string { return &m.Payload }},
	{"outbox-column-headers", "outbox column (json or jsonb object) whose string entries become headers; - for none (preset debezium: none)",
		func(m *outbox.Mapping) *string { return &m.Headers }},
	{"outbox-column-created-at", "outbox column (timestamptz) that orders and bounds outbox republish and outbox prune; - for none (preset debezium: none)",
		func(m *outbox.Mapping) *string { return &m.CreatedAt }},
}

func (f *mappingFlags) register(cmd *cobra.Command, relay bool) {
	fs := cmd.Flags()
	def := outbox.DefaultMapping()
	f.relay = relay
	fs.StringVar(&f.file, "outbox-config", "", "YAML file with the outbox mapping: preset, table, event_id, topic, key, event_type, payload, headers, created_at, extra_headers, tracing_span_context, null_payload, record_format, cloudevents_source, value_converter, key_converter, debezium_logical_name, debezium_connector_name, topic_prefix (flags win over it)")
	fs.StringVar(&f.preset, "outbox-preset", outbox.PresetEventForge, "defaults of the outbox mapping: eventforge (the contract's outbox table) or debezium (the table and records of Debezium's outbox event router; see docs/debezium.md)")
	fs.StringVar(&f.set.Table, "outbox-table", def.Table, "table of the outbox: table or schema.table")
	for _, c := range columnFlags {
		fs.StringVar(c.field(&f.set), c.name, *c.field(&def), c.usage)
	}
	fs.StringSliceVar(&f.set.ExtraHeaders, "outbox-extra-headers", nil, "more outbox columns written as headers, each column or column:header (comma-separated)")
	fs.StringVar(&f.set.NullPayload, "outbox-null-payload", outbox.NullPayloadReject, "a NULL payload: reject (record in outbox_rejected) or tombstone (a record without a value; preset debezium)")
	if relay {
		fs.StringVar(&f.set.Format, "record-format", outbox.FormatEventForge, "Kafka record format: eventforge (headers event_id, event_type, aggregate_type), cloudevents (binary content mode, ce_* headers) or debezium (header id; preset debezium)")
		fs.StringVar(&f.set.CloudEventsSource, "cloudevents-source", outbox.DefaultCloudEventsSource, "ce_source of --record-format cloudevents (a URI reference)")
		fs.StringVar(&f.set.ValueConverter, "value-converter", "", "bytes of the record value, as the Kafka Connect converter behind Debezium's router writes them: compact (compacted JSON), string (StringConverter: PostgreSQL's text of the payload, unchanged), json (JsonConverter, schemas.enable=false), json-schemas (schemas.enable=true), json-expanded or json-expanded-schemas (with table.expand.json.payload=true) (default: string with --record-format debezium, else compact; see docs/debezium.md)")
		fs.StringVar(&f.set.KeyConverter, "key-converter", "", "bytes of the record key: string (the key column's text), json or json-schemas (JsonConverter with schemas.enable false or true) (default string)")
		fs.StringVar(&f.set.DebeziumLogicalName, "debezium-logical-name", "", "with --record-format debezium: add Debezium's context headers __debezium.context.* naming this logical name (the connector's topic.prefix); empty: none")
		fs.StringVar(&f.set.DebeziumConnectorName, "debezium-connector-name", outbox.DefaultDebeziumConnectorName, "the __debezium.context.connectorName header written with --debezium-logical-name")
	}
}

// mapping resolves the mapping of cmd: the preset (flag, else file), then
// the file, then every flag the user set. topicPrefix is the prefix the
// preset or the file asks for, when the --topic-prefix flag is not set.
func (f *mappingFlags) mapping(cmd *cobra.Command) (m outbox.Mapping, topicPrefix *string, err error) {
	var file outbox.File
	if f.file != "" {
		if file, err = outbox.ReadFile(f.file); err != nil {
			return m, nil, err
		}
	}
	preset := file.Preset
	if cmd.Flags().Changed("outbox-preset") || preset == "" {
		preset = f.preset
	}
	if m, err = outbox.Preset(preset); err != nil {
		return m, nil, err
	}
	if preset == outbox.PresetDebezium {
		p := outbox.DebeziumTopicPrefix
		topicPrefix = &p
	}
	if file.TopicPrefix != "" {
		p := file.TopicPrefix
		topicPrefix = &p
	}
	m.Overlay(file.Mapping)
	var flags outbox.Mapping
	pick := func(name string, dst, src *string) {
		if cmd.Flags().Changed(name) {
			*dst = *src
		}
	}
	pick("outbox-table", &flags.Table, &f.set.Table)
	for _, c := range columnFlags {
		pick(c.name, c.field(&flags), c.field(&f.set))
	}
	pick("outbox-null-payload", &flags.NullPayload, &f.set.NullPayload)
	if f.relay {
		pick("record-format", &flags.Format, &f.set.Format)
		pick("cloudevents-source", &flags.CloudEventsSource, &f.set.CloudEventsSource)
		pick("value-converter", &flags.ValueConverter, &f.set.ValueConverter)
		pick("key-converter", &flags.KeyConverter, &f.set.KeyConverter)
		pick("debezium-logical-name", &flags.DebeziumLogicalName, &f.set.DebeziumLogicalName)
		pick("debezium-connector-name", &flags.DebeziumConnectorName, &f.set.DebeziumConnectorName)
	}
	if cmd.Flags().Changed("outbox-extra-headers") {
		flags.ExtraHeaders = append([]string{}, f.set.ExtraHeaders...)
	}
	m.Overlay(flags)
	if cmd.Flags().Changed("topic-prefix") {
		topicPrefix = nil
	}
	m.Normalize()
	return m, topicPrefix, m.Validate()
}

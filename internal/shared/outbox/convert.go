package outbox

import (
	"errors"
	"fmt"
	"strings"
)

// Value converters: which bytes a record's value holds. The names follow
// the Kafka Connect converters whose output each reproduces for the value
// Debezium's outbox event router hands them (the payload column).
const (
	// ConverterCompact: the contract's value, JSON payloads compacted, text
	// and bytea as they are. The default of the eventforge and cloudevents
	// record formats.
	ConverterCompact = "compact"
	// ConverterString: Kafka Connect's StringConverter: PostgreSQL's text of
	// a json, jsonb or text payload unchanged; bytea byte for byte (as
	// ByteArrayConverter writes it). The default of the debezium format.
	ConverterString = "string"
	// ConverterJSON: JsonConverter with schemas.enable=false: the payload
	// as a JSON string (bytea as base64).
	ConverterJSON = "json"
	// ConverterJSONSchemas: JsonConverter with schemas.enable=true: the
	// JSON string inside Kafka Connect's {"schema":…,"payload":…} envelope.
	ConverterJSONSchemas = "json-schemas"
	// ConverterJSONExpanded: the router's table.expand.json.payload=true
	// with JsonConverter, schemas.enable=false: the payload re-serialized
	// from the structure the router infers.
	ConverterJSONExpanded = "json-expanded"
	// ConverterJSONExpandedSchemas: table.expand.json.payload=true with
	// schemas.enable=true: the same inside the envelope with the inferred
	// schema.
	ConverterJSONExpandedSchemas = "json-expanded-schemas"
)

// valueConverters lists the valid Mapping.ValueConverter values.
var valueConverters = []string{ConverterCompact, ConverterString, ConverterJSON, ConverterJSONSchemas,
	ConverterJSONExpanded, ConverterJSONExpandedSchemas}

// keyConverters lists the valid Mapping.KeyConverter values.
var keyConverters = []string{ConverterString, ConverterJSON, ConverterJSONSchemas}

// Debezium's logical schema names of the column types the router passes on.
const (
	schemaNameJSON = "io.debezium.data.Json"
	schemaNameUUID = "io.debezium.data.Uuid"
)

// ErrUnavailable marks a converter's error that is not the event's fault:
// what the converter needs (a schema registry) did not answer. The event
// must be retried later, never set aside; any other error of a converter
// is the event's and sets it aside (outbox_rejected).
var ErrUnavailable = errors.New("unavailable")

// IsUnavailable reports whether err wraps ErrUnavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// ValueConverter decides the bytes of a record's value: the one place that
// does, so that every record format and every path that builds records
// (stream, backfill, republish) write the same value for the same row.
type ValueConverter interface {
	// AppendValue appends e's value to dst and returns the extended
	// slice; present is false when the record has no value (a tombstone).
	AppendValue(dst []byte, e *Event) (out []byte, present bool, err error)
}

// KeyConverter decides the bytes of a record's key.
type KeyConverter interface {
	// AppendKey appends e's key to dst.
	AppendKey(dst []byte, e *Event) ([]byte, error)
}

// Column is what a converter with schemas needs to know of a column: its
// type (pg_type.typname, a domain's base type) and whether it is NOT NULL.
type Column struct {
	Type    string
	NotNull bool
}

// ColumnSchemas are the payload and key columns as the catalog has them.
type ColumnSchemas struct {
	Payload, Key Column
	// PayloadName is the payload column's name: the router names the
	// expanded payload's struct schema after it.
	PayloadName string
}

// defaultColumns stand in when a mapping was not checked against the
// catalog: Debezium's example outbox (payload jsonb NULL, aggregateid
// varchar NOT NULL).
var defaultColumns = ColumnSchemas{Payload: Column{Type: "jsonb"}, Key: Column{Type: "varchar", NotNull: true}, PayloadName: "payload"}

// NewValueConverter returns the value converter of a name (empty:
// compact) for the given columns.
func NewValueConverter(name string, cols ColumnSchemas) (ValueConverter, error) {
	switch name {
	case "", ConverterCompact:
		return compactConverter{}, nil
	case ConverterString:
		return stringConverter{}, nil
	case ConverterJSON:
		return jsonConverter{}, nil
	case ConverterJSONSchemas:
		return jsonConverter{schemas: true, optional: !cols.Payload.NotNull}, nil
	case ConverterJSONExpanded, ConverterJSONExpandedSchemas:
		return expandedConverter{schemas: name == ConverterJSONExpandedSchemas, optional: !cols.Payload.NotNull, name: cols.PayloadName}, nil
	}
	return nil, fmt.Errorf("invalid value converter %q: want %s", name, strings.Join(valueConverters, ", "))
}

// NewKeyConverter returns the key converter of a name (empty: string) for
// the given key column.
func NewKeyConverter(name string, cols ColumnSchemas) (KeyConverter, error) {
	switch name {
	case "", ConverterString:
		return stringKey{}, nil
	case ConverterJSON, ConverterJSONSchemas:
		typ, logical, err := keySchemaType(cols.Key.Type)
		if err != nil {
			return nil, err
		}
		return jsonKey{schemas: name == ConverterJSONSchemas, typ: typ, name: logical, optional: !cols.Key.NotNull}, nil
	}
	return nil, fmt.Errorf("invalid key converter %q: want %s", name, strings.Join(keyConverters, ", "))
}

// keySchemaType is the Kafka Connect schema type (and logical name) that
// Debezium gives a key column of type typ.
func keySchemaType(typ string) (schemaType, logical string, err error) {
	switch typ {
	case "text", "varchar", "bpchar":
		return "string", "", nil
	case "uuid":
		return "string", schemaNameUUID, nil
	case "int2":
		return "int16", "", nil
	case "int4":
		return "int32", "", nil
	case "int8":
		return "int64", "", nil
	}
	return "", "", fmt.Errorf("a key column of type %s is not supported by the json key converters (Debezium writes it as a Kafka Connect Decimal): use the string key converter", typ)
}

// compactConverter writes the contract's value.
type compactConverter struct{}

func (compactConverter) AppendValue(dst []byte, e *Event) ([]byte, bool, error) {
	switch {
	case e.NoPayload:
		return dst, false, nil
	case e.PayloadKind != PayloadJSON:
		return append(dst, e.Payload...), true, nil
	}
	out, err := appendCompact(dst, e)
	return out, true, err
}

// stringConverter writes the payload's text (or bytes) unchanged.
type stringConverter struct{}

func (stringConverter) AppendValue(dst []byte, e *Event) ([]byte, bool, error) {
	if e.NoPayload {
		return dst, false, nil
	}
	return append(dst, e.Payload...), true, nil
}

// jsonConverter writes the payload as JsonConverter writes the router's
// string (or bytes) value, with or without the schema envelope.
type jsonConverter struct {
	schemas  bool
	optional bool
}

func (c jsonConverter) AppendValue(dst []byte, e *Event) ([]byte, bool, error) {
	if c.schemas {
		dst = append(dst, `{"schema":`...)
		dst = appendPayloadSchema(dst, e, c.optional)
		dst = append(dst, `,"payload":`...)
	}
	dst = appendPayloadJSON(dst, e)
	if c.schemas {
		dst = append(dst, '}')
	}
	return dst, true, nil
}

// appendPayloadJSON appends the payload as a JSON value: null for a NULL
// payload, base64 for bytea, else a JSON string of its text.
func appendPayloadJSON(dst []byte, e *Event) []byte {
	switch {
	case e.NoPayload:
		return append(dst, "null"...)
	case e.PayloadKind == PayloadBinary:
		return appendJacksonBytes(dst, e.Payload)
	}
	return appendJacksonString(dst, e.Payload)
}

// appendPayloadSchema appends the Kafka Connect schema Debezium gives the
// payload column: bytes for bytea, string for text, and string named
// io.debezium.data.Json (version 1) for json and jsonb.
func appendPayloadSchema(dst []byte, e *Event, optional bool) []byte {
	switch {
	case e.PayloadKind == PayloadBinary:
		return appendSchema(dst, "bytes", optional, "")
	case e.PayloadKind == PayloadText:
		return appendSchema(dst, "string", optional, "")
	}
	return appendSchema(dst, "string", optional, schemaNameJSON)
}

// appendSchema appends a primitive schema as JsonConverter writes it:
// type, optional, then name and version when it has a (Debezium logical)
// name.
func appendSchema(dst []byte, typ string, optional bool, name string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","optional":`...)
	dst = appendBool(dst, optional)
	if name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendJacksonString(dst, []byte(name))
		dst = append(dst, `,"version":1`...)
	}
	return append(dst, '}')
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// stringKey writes the key column's text.
type stringKey struct{}

func (stringKey) AppendKey(dst []byte, e *Event) ([]byte, error) {
	return append(dst, e.AggregateID...), nil
}

// jsonKey writes the key as JsonConverter does: a JSON string, or the
// integer of an integer column, with or without the envelope.
type jsonKey struct {
	schemas  bool
	typ      string // Kafka Connect schema type
	name     string // logical name, or empty
	optional bool
}

// errKeyNotInteger: an integer key column's text that is not an integer,
// which PostgreSQL never sends.
var errKeyNotInteger = errors.New("the key of an integer column is not an integer")

func (k jsonKey) AppendKey(dst []byte, e *Event) ([]byte, error) {
	if k.schemas {
		dst = append(dst, `{"schema":`...)
		dst = appendSchema(dst, k.typ, k.optional, k.name)
		dst = append(dst, `,"payload":`...)
	}
	if k.typ == "string" {
		dst = appendJacksonString(dst, []byte(e.AggregateID))
	} else {
		if !isInteger(e.AggregateID) {
			return dst, fmt.Errorf("%w: %q", errKeyNotInteger, TruncateName(e.AggregateID))
		}
		dst = append(dst, e.AggregateID...)
	}
	if k.schemas {
		dst = append(dst, '}')
	}
	return dst, nil
}

// isInteger reports whether s is PostgreSQL's text of an integer: an
// optional minus and decimal digits, as Jackson writes an int or a long.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

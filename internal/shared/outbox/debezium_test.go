package outbox

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// buildWith builds e's record with the builder of m.
func buildWith(t *testing.T, m Mapping, e *Event) *sarama.ProducerMessage {
	t.Helper()
	var r Record
	if err := NewBuilder("outbox.event.").WithFormat(&m).Build(&r, e); err != nil {
		t.Fatal(err)
	}
	return &r.Msg
}

// TestDebeziumContextHeaders: with a logical name, the four context
// headers come first, in the connector's order, then id, then the extra
// header columns; an extra column may not pose as one of Debezium's.
func TestDebeziumContextHeaders(t *testing.T) {
	m, _ := Preset(PresetDebezium)
	m.DebeziumLogicalName = "dbserver1"
	id := uuid.New()
	e := &Event{ID: id, AggregateType: "Order", AggregateID: "42", Payload: []byte(`{"a": 1}`), JSONChecked: true,
		Headers: map[string]string{"tenant": "acme", "__debezium.context.taskId": "spoof"}}
	msg := buildWith(t, m, e)
	var keys, vals []string
	for _, h := range msg.Headers {
		keys, vals = append(keys, string(h.Key)), append(vals, string(h.Value))
	}
	want := []string{HeaderDebeziumLogicalName, HeaderDebeziumTaskID, HeaderDebeziumConnectorName, HeaderDebeziumRunID, "id", "tenant"}
	if len(keys) != len(want) {
		t.Fatalf("headers %v", keys)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("headers %v, want %v", keys, want)
		}
	}
	if vals[0] != "dbserver1" || vals[1] != "0" || vals[2] != "postgresql" || vals[4] != id.String() || vals[5] != "acme" {
		t.Fatalf("values %v", vals)
	}
	if _, err := uuid.Parse(vals[3]); err != nil {
		t.Fatalf("runId %q: %v", vals[3], err)
	}
	// The run id names the process's run: the same on every record.
	m.DebeziumConnectorName = "custom"
	again := buildWith(t, m, &Event{ID: uuid.New(), AggregateType: "Order", AggregateID: "1", Payload: []byte("{}")})
	if string(again.Headers[3].Value) != vals[3] || string(again.Headers[2].Value) != "custom" {
		t.Fatalf("second record's headers %v", again.Headers)
	}
	// Without a logical name: only id, as the router writes by default.
	m.DebeziumLogicalName = ""
	if plain := buildWith(t, m, e); len(plain.Headers) != 2 || string(plain.Headers[0].Key) != "id" {
		t.Fatalf("headers without a logical name: %v", plain.Headers)
	}
}

// TestFormatsKeepTheirValues: the debezium format writes PostgreSQL's
// text as received; the eventforge and cloudevents formats keep the
// contract's compact JSON; a configured converter applies to any format.
func TestFormatsKeepTheirValues(t *testing.T) {
	text := `{"b": [1.0, 1e3], "a": "x y"}`
	for _, c := range []struct {
		format, converter, want string
	}{
		{FormatDebezium, "", text},
		{FormatEventForge, "", `{"b":[1.0,1e3],"a":"x y"}`},
		{FormatCloudEvents, "", `{"b":[1.0,1e3],"a":"x y"}`},
		{FormatEventForge, ConverterString, text},
		{FormatDebezium, ConverterCompact, `{"b":[1.0,1e3],"a":"x y"}`},
		{FormatDebezium, ConverterJSON, `"{\"b\": [1.0, 1e3], \"a\": \"x y\"}"`},
	} {
		m := DefaultMapping()
		m.Format, m.ValueConverter = c.format, c.converter
		msg := buildWith(t, m, &Event{ID: uuid.New(), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: []byte(text), JSONChecked: true})
		if got := string(encoded(t, msg.Value)); got != c.want {
			t.Errorf("%s/%s: value %s, want %s", c.format, c.converter, got, c.want)
		}
	}
}

// TestConverterSettingsInTheFile: the converters and context headers
// can be set in an --outbox-config file.
func TestConverterSettingsInTheFile(t *testing.T) {
	f, err := ParseFile([]byte("preset: debezium\nvalue_converter: json-expanded\nkey_converter: json-schemas\ndebezium_logical_name: dbserver1\ndebezium_connector_name: pg\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Preset(PresetDebezium)
	m.Overlay(f.Mapping)
	if m.ValueConverter != ConverterJSONExpanded || m.KeyConverter != ConverterJSONSchemas || m.DebeziumLogicalName != "dbserver1" || m.DebeziumConnectorName != "pg" {
		t.Fatalf("mapping %+v", m)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}

package outbox

import (
	"errors"
	"strings"
	"testing"
)

func TestMappingValidateCollectsEveryProblem(t *testing.T) {
	m := Mapping{
		Table: "a.b.c", EventID: "", Topic: "t", Key: "t", Payload: "",
		ExtraHeaders: []string{":x"}, NullPayload: "drop", Format: "avro",
	}
	err := m.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	want := []string{
		`invalid outbox table "a.b.c"`,
		"no event id column",
		"no payload column",
		`column "t" is mapped twice: as topic and as key`,
		`invalid extra header ":x"`,
		`invalid null payload policy "drop"`,
		`invalid --record-format "avro"`,
	}
	lines := strings.Split(err.Error(), "; ")
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}

func TestMappingValidate(t *testing.T) {
	ce := DefaultMapping()
	ce.Format, ce.EventType = FormatCloudEvents, None
	dbz, _ := Preset(PresetDebezium)
	noSource := DefaultMapping()
	noSource.Format, noSource.CloudEventsSource = FormatCloudEvents, ""
	reservedExtra := DefaultMapping()
	reservedExtra.ExtraHeaders = []string{"tenant", "origin:X-EventForge-Original-Topic"}
	cases := []struct {
		name string
		m    Mapping
		want string // empty: valid
	}{
		{"default", DefaultMapping(), ""},
		{"debezium", dbz, ""},
		{"table without schema", Mapping{Table: "events", EventID: "i", Topic: "t", Key: "k", Payload: "p"}, ""},
		{"cloudevents without event type", ce, "needs an event type column"},
		{"cloudevents without source", noSource, "non-empty --cloudevents-source"},
		{"extra header with a reserved name", reservedExtra, "reserved header name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	f, err := ParseFile([]byte(`
preset: debezium
table: inventory.outboxevent
payload: body
headers: "-"
extra_headers: [tenant, "trace_id:traceparent"]
record_format: cloudevents
cloudevents_source: /orders
topic_prefix: events.
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Preset != "debezium" || f.TopicPrefix != "events." || f.Table != "inventory.outboxevent" ||
		f.Payload != "body" || f.Format != FormatCloudEvents || f.CloudEventsSource != "/orders" ||
		len(f.ExtraHeaders) != 2 || f.ExtraHeaders[1] != "trace_id:traceparent" {
		t.Fatalf("parsed %+v", f)
	}
	m, _ := Preset(f.Preset)
	m.Overlay(f.Mapping)
	m.Normalize()
	if m.EventID != "id" || m.Payload != "body" || m.Headers != "" || m.Key != "aggregateid" {
		t.Fatalf("overlaid %+v", m)
	}
	x, err := m.Extras()
	if err != nil || x[0] != (Extra{"tenant", "tenant"}) || x[1] != (Extra{"trace_id", "traceparent"}) {
		t.Fatalf("extras %v, %v", x, err)
	}
	if _, err := ParseFile([]byte("tabel: outbox\n")); err == nil || !strings.Contains(err.Error(), "tabel") {
		t.Fatalf("unknown key: %v", err)
	}
	if f, err := ParseFile(nil); err != nil || f.Preset != "" {
		t.Fatalf("empty file: %+v, %v", f, err)
	}
}

func TestPreset(t *testing.T) {
	if _, err := Preset("kafka-connect"); err == nil {
		t.Fatal("unknown preset accepted")
	}
	m, _ := Preset(PresetDebezium)
	// Debezium's router defaults: table.field.event.id=id, .key=aggregateid,
	// .type=type, .payload=payload, route.by.field=aggregatetype.
	if m.EventID != "id" || m.Key != "aggregateid" || m.EventType != "type" || m.Payload != "payload" ||
		m.Topic != "aggregatetype" || m.Format != FormatDebezium || m.NullPayload != NullPayloadTombstone {
		t.Fatalf("debezium preset %+v", m)
	}
}

func TestQuotedTable(t *testing.T) {
	for in, want := range map[string]string{"outbox": `"public"."outbox"`, "Inv.Out box": `"Inv"."Out box"`} {
		m := Mapping{Table: in}
		if got := m.QuotedTable(); got != want {
			t.Errorf("QuotedTable(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCatalogProblemsCollectsEveryColumn(t *testing.T) {
	m := DefaultMapping()
	m.ExtraHeaders = []string{"tenant"}
	c := &Catalog{Mapping: m, Types: map[string]string{
		"event_id": "int8", "aggregate_type": "text", "aggregate_id": "text",
		"payload": "xml", "headers": "jsonb", "created_at": "date",
	}}
	c.extras, _ = m.Extras()
	err := c.problems()
	if !errors.Is(err, ErrMapping) {
		t.Fatalf("problems() = %v, want ErrMapping", err)
	}
	for _, w := range []string{
		`column "event_id" of public.outbox (the event id column) has type int8`,
		`has no column "event_type" (the event type column)`,
		`column "payload" of public.outbox (the payload column) has type xml: want jsonb, json, text, varchar, bytea`,
		`column "created_at" of public.outbox (the created at column) has type date`,
		`has no column "tenant" (extra header tenant)`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("problems() lacks %q:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "; "); n != 4 || !strings.Contains(err.Error(), "(5 problems)") {
		t.Errorf("want 5 problems, got:\n%v", err)
	}
}

func TestSelectList(t *testing.T) {
	m, _ := Preset(PresetDebezium)
	m.ExtraHeaders = []string{"tenant:x-tenant"}
	c := &Catalog{Mapping: m, Types: map[string]string{"payload": "bytea"}}
	c.extras, _ = m.Extras()
	want := `"id"::text, "aggregatetype"::text, "aggregateid"::text, "type"::text, "payload", NULL::text, NULL::timestamptz, "tenant"::text`
	if got := c.SelectList(); got != want {
		t.Fatalf("SelectList() =\n%s\nwant\n%s", got, want)
	}
	if _, err := c.CreatedAtColumn("outbox prune"); err == nil || !strings.Contains(err.Error(), "outbox prune needs a created-at column") {
		t.Fatalf("CreatedAtColumn: %v", err)
	}
}

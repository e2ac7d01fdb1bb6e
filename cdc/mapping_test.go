package cdc

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// mappedTable creates shop.events, an outbox whose columns have other names,
// types and order than the contract's, and a publication of it.
func mappedTable(t *testing.T, url, payloadType string) (outbox.Mapping, string) {
	t.Helper()
	db := connect(t, url)
	pub := testenv.UniqueName("pub")
	mustExec(t, db, `CREATE SCHEMA IF NOT EXISTS shop`)
	mustExec(t, db, `CREATE TABLE shop.events (
		body `+payloadType+`, tenant text, ref bigint NOT NULL, stream varchar(100) NOT NULL,
		meta json, ev uuid PRIMARY KEY, etype text NOT NULL, ts timestamptz NOT NULL DEFAULT now())`)
	mustExec(t, db, `CREATE PUBLICATION `+pub+` FOR TABLE shop.events WITH (publish = 'insert')`)
	return outbox.Mapping{
		Table: "shop.events", EventID: "ev", Topic: "stream", Key: "ref", EventType: "etype",
		Payload: "body", Headers: "meta", CreatedAt: "ts", ExtraHeaders: []string{"tenant:x-tenant"},
	}, pub
}

// TestRelayReadsAMappedTable: a table with other column names goes to
// Kafka as the contract's records, extra columns as headers; republish
// reads it through the same mapping.
func TestRelayReadsAMappedTable(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	m, pub := mappedTable(t, url, "jsonb")
	cfg := testConfig(t, url, env.Brokers)
	cfg.Mapping, cfg.Publication = m, pub
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	db := connect(t, url)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	since := time.Now().Add(-time.Second)
	for i, id := range ids {
		mustExec(t, db, `INSERT INTO shop.events (ev, stream, ref, etype, body, meta, tenant) VALUES ($1, 'invoices', $2, 'invoice.issued', $3, $4, $5)`,
			id, 100+i, `{"n":  `+string(rune('0'+i))+`}`, `{"trace": "t-1", "n": 5}`, []*string{nil, ptr("acme"), ptr("globex")}[i])
	}
	check := func(col *collector, n int, what string) {
		t.Helper()
		waitFor(t, 30*time.Second, what, func() bool { return col.len() >= n })
		for _, msg := range col.records() {
			id, _ := header(msg, outbox.HeaderEventID)
			i := indexOf(ids, id)
			if i < 0 {
				t.Fatalf("%s: unknown event %q", what, id)
			}
			want := map[string]string{"event_id": ids[i].String(), "event_type": "invoice.issued", "aggregate_type": "invoices", "trace": "t-1"}
			if i > 0 {
				want["x-tenant"] = []string{"", "acme", "globex"}[i]
			}
			if got := headersOf(msg); !equalMaps(got, want) {
				t.Errorf("%s: headers %v, want %v", what, got, want)
			}
			if string(msg.Key) != []string{"100", "101", "102"}[i] || string(msg.Value) != `{"n":`+string(rune('0'+i))+`}` {
				t.Errorf("%s: key %q value %q", what, msg.Key, msg.Value)
			}
		}
	}
	col := consume(t, env.Brokers, cfg.TopicPrefix+"invoices")
	check(col, len(ids), "relayed events")
	// The bigint key has no binary decoding: the relay went back to text
	// tuples and lost nothing on the way (every record checked above).
	if !r.textTuples.Load() {
		t.Error("a bigint key column did not turn binary tuples off")
	}

	// outbox republish reads the same table through the mapping: the same
	// records again, to the topic the relay created.
	res, err := Republish(context.Background(), cfg, since, time.Time{}, testLogger(t))
	if err != nil || res.Published != int64(len(ids)) {
		t.Fatalf("Republish = %+v, %v", res, err)
	}
	check(col, 2*len(ids), "republished events")
}

// TestRelayPayloadTypes: jsonb and json payloads are compacted JSON, text
// is produced as is, bytea byte for byte (pgoutput sends it as \x hex),
// also when it is not UTF-8.
func TestRelayPayloadTypes(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	cases := []struct {
		name, typ, literal string
		want               []byte
		byteaOutput        string // the database's bytea_output, which the walsender uses
	}{
		{"jsonb", "jsonb", `'{"b": [1, 2],  "a": "x"}'`, []byte(`{"a":"x","b":[1,2]}`), ""},
		{"json", "json", `'{"b": [1, 2],  "a": "x"}'`, []byte(`{"b":[1,2],"a":"x"}`), ""},
		{"text", "text", `'not  JSON at all'`, []byte("not  JSON at all"), ""},
		{"bytea", "bytea", `'\xff00fe'::bytea`, []byte{0xff, 0x00, 0xfe}, ""},
		{"bytea escape output", "bytea", `'\xff005c41fe'::bytea`, []byte{0xff, 0x00, '\\', 'A', 0xfe}, "escape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := env.NewDatabase(t)
			if tc.byteaOutput != "" {
				mustExec(t, connect(t, url), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET bytea_output = %L', current_database(), '`+tc.byteaOutput+`'); END $$`)
			}
			m, pub := mappedTable(t, url, tc.typ)
			cfg := testConfig(t, url, env.Brokers)
			cfg.Mapping, cfg.Publication = m, pub
			cfg.Mapping.Format = outbox.FormatCloudEvents
			r := startRelay(t, cfg)
			waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
			db := connect(t, url)
			mustExec(t, db, `INSERT INTO shop.events (ev, stream, ref, etype, body) VALUES (gen_random_uuid(), 'p', 1, 'e', `+tc.literal+`)`)
			col := consume(t, env.Brokers, cfg.TopicPrefix+"p")
			waitFor(t, 30*time.Second, "the event", func() bool { return col.len() > 0 })
			msg := col.records()[0]
			if !bytes.Equal(msg.Value, tc.want) {
				t.Fatalf("value %q (%x), want %q (%x)", msg.Value, msg.Value, tc.want, tc.want)
			}
			ct, _ := header(msg, "content-type")
			wantCT := map[string]string{"jsonb": "application/json", "json": "application/json", "text": outbox.ContentTypeText, "bytea": "application/octet-stream"}[tc.typ]
			if ct != wantCT {
				t.Fatalf("content-type %q, want %q", ct, wantCT)
			}
		})
	}
}

// TestRelayWritesCloudEvents: --record-format cloudevents writes the binary
// content mode: ce_* attributes, commit time as ce_time, data as the value.
func TestRelayWritesCloudEvents(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.Mapping = outbox.DefaultMapping()
	cfg.Mapping.Format, cfg.Mapping.CloudEventsSource = outbox.FormatCloudEvents, "urn:example:orders"
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	db := connect(t, url)
	id := uuid.New()
	mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
		VALUES ($1, 'orders', 'o-1', 'order.created', '{"a": 1}', '{"traceparent": "00-1"}')`, id)
	var created time.Time
	if err := db.QueryRow(context.Background(), "SELECT created_at FROM outbox").Scan(&created); err != nil {
		t.Fatal(err)
	}
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitFor(t, 30*time.Second, "the event", func() bool { return col.len() > 0 })
	msg := col.records()[0]
	hs := headersOf(msg)
	ceTime, err := time.Parse(time.RFC3339, hs["ce_time"])
	// The commit follows the insert's now(); the record timestamp is the
	// same commit time in milliseconds.
	if err != nil || ceTime.Before(created) || ceTime.Sub(created) > time.Minute || !ceTime.Truncate(time.Millisecond).Equal(msg.Timestamp) {
		t.Errorf("ce_time %q (%v), created %v, record timestamp %v", hs["ce_time"], err, created, msg.Timestamp)
	}
	delete(hs, "ce_time")
	want := map[string]string{"ce_id": id.String(), "ce_source": "urn:example:orders", "ce_specversion": "1.0",
		"ce_type": "order.created", "ce_subject": "o-1", "ce_partitionkey": "o-1", "content-type": "application/json", "traceparent": "00-1"}
	if !equalMaps(hs, want) {
		t.Errorf("headers %v, want %v", hs, want)
	}
	if string(msg.Key) != "o-1" || string(msg.Value) != `{"a":1}` {
		t.Errorf("key %q value %q", msg.Key, msg.Value)
	}
}

// TestRelayRefusesAMappingTheTableDoesNotMatch: every mismatch is named,
// once, and the relay stops instead of retrying.
func TestRelayRefusesAMappingTheTableDoesNotMatch(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	m, pub := mappedTable(t, url, "jsonb")
	m.EventID, m.Key, m.Headers = "event_uuid", "etype", "tenant" // missing; mapped twice is caught by Validate; wrong type
	m.Key = "aggregate"
	m.CreatedAt = "ref"
	cfg := testConfig(t, url, env.Brokers)
	cfg.Mapping, cfg.Publication = m, pub
	r := startRelay(t, cfg)
	r.waitFatal(t, outbox.ErrMapping)
	for _, w := range []string{`no column "event_uuid" (the event id column)`, `no column "aggregate" (the key column)`,
		`column "tenant" of shop.events (the headers column) has type text`, `column "ref" of shop.events (the created at column) has type int8`} {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, r.err)
		}
	}
	if n := strings.Count(r.err.Error(), "; "); n != 3 {
		t.Errorf("want 4 problems, got:\n%v", r.err)
	}
}

func ptr(s string) *string { return &s }

func indexOf(ids []uuid.UUID, s string) int {
	for i, id := range ids {
		if id.String() == s {
			return i
		}
	}
	return -1
}

func headersOf(m *sarama.ConsumerMessage) map[string]string {
	out := map[string]string{}
	for _, h := range m.Headers {
		out[string(h.Key)] = string(h.Value)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

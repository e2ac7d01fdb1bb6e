package cdc

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// debeziumOutbox creates a table shaped like Debezium's outbox example
// (payload of the given type) and a publication of its inserts, and
// returns the relay configuration that reads it with the debezium preset.
func debeziumOutbox(t *testing.T, db *pgx.Conn, url string, brokers []string, payloadType string) Config {
	t.Helper()
	table := testenv.UniqueName("outbox")
	pub := testenv.UniqueName("pub")
	mustExec(t, db, `CREATE TABLE `+table+` (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
		aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload `+payloadType+`)`)
	mustExec(t, db, `CREATE PUBLICATION `+pub+` FOR TABLE `+table+` WITH (publish = 'insert')`)
	cfg := testConfig(t, url, brokers)
	m, err := outbox.Preset(outbox.PresetDebezium)
	if err != nil {
		t.Fatal(err)
	}
	m.Table = "public." + table
	cfg.Mapping, cfg.Publication = m, pub
	return cfg
}

// streamDebezium starts a relay on cfg, waits until it streams, and
// returns the topic of aggregate type Order, deleted when the test ends.
func streamDebezium(t *testing.T, cfg Config, brokers []string) string {
	t.Helper()
	topic := cfg.TopicPrefix + "Order"
	deleteTopics(t, brokers, topic)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	return topic
}

// newDebeziumOutbox is debeziumOutbox in a database of its own.
func newDebeziumOutbox(t *testing.T, payloadType string) (*testenv.Env, *pgx.Conn, Config) {
	t.Helper()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	return env, db, debeziumOutbox(t, db, url, env.Brokers, payloadType)
}

// payloadShapes are the JSON payloads compared: the shapes the golden
// tests of the converters use (nested objects, unicode and escapes, 1.0,
// 1e3, big integers, key order, empty object and array, null, …).
func payloadShapes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../internal/shared/outbox/testdata/connect/shapes.txt")
	if err != nil {
		t.Fatal(err)
	}
	shapes := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(shapes) < 20 {
		t.Fatalf("%d shapes", len(shapes))
	}
	return shapes
}

// deleteTopics removes the topics a test created.
func deleteTopics(t *testing.T, brokers []string, topics ...string) {
	t.Cleanup(func() {
		admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
		if err != nil {
			t.Logf("delete topics: %v", err)
			return
		}
		defer admin.Close()
		for _, topic := range topics {
			if err := admin.DeleteTopic(topic); err != nil {
				t.Logf("delete topic %s: %v", topic, err)
			}
		}
	})
}

// payloadCase is one row the test inserts: its payload as a SQL text
// parameter (nil: NULL) or, for bytea, raw bytes.
type payloadCase struct {
	text  *string
	bytes []byte
}

func str(s string) *string { return &s }

// value is the case's payload as a query argument.
func (c payloadCase) value() any {
	switch {
	case c.text != nil:
		return *c.text
	case c.bytes != nil:
		return c.bytes
	}
	return nil
}

// payloadRun is one relay reading one Debezium-shaped outbox.
type payloadRun struct {
	typ   string
	cfg   Config
	topic string
	ids   []uuid.UUID
}

// insert commits each case as a row of the run's table.
func (rn *payloadRun) insert(t *testing.T, db *pgx.Conn, cases []payloadCase) {
	t.Helper()
	cast := "::" + rn.typ
	if rn.typ == "bytea" {
		cast = ""
	}
	for i, c := range cases {
		id := uuid.New()
		mustExec(t, db, `INSERT INTO `+rn.cfg.Mapping.Table+` (id, aggregatetype, aggregateid, type, payload)
			VALUES ($1, 'Order', $2, 'OrderCreated', $3`+cast+`)`, id, "order-"+string(rune('a'+i%26)), c.value())
		rn.ids = append(rn.ids, id)
	}
}

// check compares every record's value with PostgreSQL's text of its row's
// payload (bytea: the bytes; NULL: no value).
func (rn *payloadRun) check(t *testing.T, db *pgx.Conn, brokers []string) {
	t.Helper()
	col := consume(t, brokers, rn.topic)
	waitFor(t, 30*time.Second, rn.typ+" records", func() bool { return col.len() >= len(rn.ids) })
	sql := `SELECT convert_to(payload::text, 'UTF8') FROM ` + rn.cfg.Mapping.Table + ` WHERE id = $1`
	if rn.typ == "bytea" {
		sql = `SELECT payload FROM ` + rn.cfg.Mapping.Table + ` WHERE id = $1`
	}
	recs := col.records()
	for _, msg := range recs {
		id, _ := header(msg, "id")
		var want []byte
		if err := db.QueryRow(context.Background(), sql, id).Scan(&want); err != nil {
			t.Fatalf("%s %s: %v", rn.typ, id, err)
		}
		switch {
		case want == nil && msg.Value != nil:
			t.Errorf("%s: NULL payload gave value %q, want none", rn.typ, msg.Value)
		case want != nil && !bytes.Equal(msg.Value, want):
			t.Errorf("%s: value\n%q\nwant PostgreSQL's text\n%q", rn.typ, msg.Value, want)
		}
	}
	if len(recs) != len(rn.ids) {
		t.Errorf("%s: %d records, want %d", rn.typ, len(recs), len(rn.ids))
	}
}

// TestDebeziumValuesAreThePayloadsText: with the debezium preset, each
// record's value through the real relay is byte for byte what PostgreSQL
// prints for the payload (SELECT payload::text), for jsonb, json and text
// payloads of every shape; bytea is the bytes themselves; a NULL payload
// gives a record without a value. Before, json and jsonb values were
// compacted ({"a":1} where Debezium writes {"a": 1}).
func TestDebeziumValuesAreThePayloadsText(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	var jsonCases []payloadCase
	for _, s := range payloadShapes(t) {
		jsonCases = append(jsonCases, payloadCase{text: str(s)})
	}
	jsonCases = append(jsonCases, payloadCase{})
	cases := map[string][]payloadCase{
		"jsonb": jsonCases, "json": jsonCases,
		"text":  {{text: str(`plain "text", é, tab	`)}, {text: str(`{"t":  1}`)}, {text: str("")}, {}},
		"bytea": {{bytes: []byte{0, 0xff, 0x10, '\\'}}, {bytes: []byte{}}, {bytes: []byte(`{"a": 1}`)}, {}},
	}
	var runs []*payloadRun
	for typ := range cases {
		cfg := debeziumOutbox(t, db, url, env.Brokers, typ)
		runs = append(runs, &payloadRun{typ: typ, cfg: cfg, topic: streamDebezium(t, cfg, env.Brokers)})
	}
	for _, rn := range runs {
		rn.insert(t, db, cases[rn.typ])
	}
	for _, rn := range runs {
		rn.check(t, db, env.Brokers)
	}
}

// TestDebeziumConvertersThroughTheRelay: the JsonConverter forms and the
// context headers reach Kafka through the relay: the value is the schema
// envelope Debezium's router and JsonConverter write for a nullable jsonb
// payload around PostgreSQL's text, the key the envelope of a NOT NULL
// varchar, and the headers the connector's four, then id.
func TestDebeziumConvertersThroughTheRelay(t *testing.T) {
	t.Parallel()
	env, db, cfg := newDebeziumOutbox(t, "jsonb")
	cfg.Mapping.ValueConverter = outbox.ConverterJSONSchemas
	cfg.Mapping.KeyConverter = outbox.ConverterJSONSchemas
	cfg.Mapping.DebeziumLogicalName = "dbserver1"
	topic := streamDebezium(t, cfg, env.Brokers)
	shapes := payloadShapes(t)
	for _, s := range shapes {
		mustExec(t, db, `INSERT INTO `+cfg.Mapping.Table+` VALUES ($1, 'Order', 'order-1', 'OrderCreated', $2::jsonb)`, uuid.New(), s)
	}
	col := consume(t, env.Brokers, topic)
	waitFor(t, 30*time.Second, "records", func() bool { return col.len() >= len(shapes) })
	const schema = `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":`
	for _, msg := range col.records() {
		if string(msg.Key) != `{"schema":{"type":"string","optional":false},"payload":"order-1"}` {
			t.Fatalf("key %s", msg.Key)
		}
		id, _ := header(msg, "id")
		var text string
		if err := db.QueryRow(context.Background(), `SELECT payload::text FROM `+cfg.Mapping.Table+` WHERE id = $1`, id).Scan(&text); err != nil {
			t.Fatal(err)
		}
		var env struct{ Payload string }
		if !bytes.HasPrefix(msg.Value, []byte(schema)) || json.Unmarshal(msg.Value, &env) != nil || env.Payload != text {
			t.Errorf("value %s, want the envelope around %q", msg.Value, text)
		}
		var names []string
		for _, h := range msg.Headers {
			names = append(names, string(h.Key))
		}
		if got := strings.Join(names, ","); got != "__debezium.context.connectorLogicalName,__debezium.context.taskId,__debezium.context.connectorName,__debezium.context.runId,id" {
			t.Errorf("headers %s", got)
		}
	}
}

// TestExpandedPayloadTheRouterCannotConvert: with the expanded converter a
// payload on which the router's conversion fails (an integer beyond 64
// bits: Debezium's task stops) is set aside in outbox_rejected with that
// reason, and the rows after it are published.
func TestExpandedPayloadTheRouterCannotConvert(t *testing.T) {
	t.Parallel()
	env, db, cfg := newDebeziumOutbox(t, "jsonb")
	cfg.Mapping.ValueConverter = outbox.ConverterJSONExpanded
	topic := streamDebezium(t, cfg, env.Brokers)
	bad, good := uuid.New(), uuid.New()
	mustExec(t, db, `INSERT INTO `+cfg.Mapping.Table+` VALUES ($1, 'Order', 'k', 'T', '{"big": 123456789012345678901234567890}')`, bad)
	mustExec(t, db, `INSERT INTO `+cfg.Mapping.Table+` VALUES ($1, 'Order', 'k', 'T', '{"n": 1e3, "s": "x"}')`, good)
	col := consume(t, env.Brokers, topic)
	waitFor(t, 30*time.Second, "the good record", func() bool { return col.len() >= 1 })
	var reason string
	waitFor(t, 30*time.Second, "the bad row in outbox_rejected", func() bool {
		return db.QueryRow(context.Background(), `SELECT reason FROM outbox_rejected WHERE event_id = $1`, bad).Scan(&reason) == nil
	})
	if !strings.Contains(reason, "does not fit 64 bits") {
		t.Errorf("reason %q", reason)
	}
	recs := col.records()
	if id, _ := header(recs[0], "id"); len(recs) != 1 || id != good.String() || string(recs[0].Value) != `{"n":1000,"s":"x"}` {
		t.Fatalf("records %d, first %s %s", len(recs), id, recs[0].Value)
	}
}

// TestDebeziumRepublishWritesThePayloadsText: outbox republish, which
// reads rows with SQL instead of the slot, writes the same values as the
// stream: PostgreSQL's text of each payload.
func TestDebeziumRepublishWritesThePayloadsText(t *testing.T) {
	t.Parallel()
	env, db, cfg := newDebeziumOutbox(t, "jsonb")
	mustExec(t, db, `ALTER TABLE `+cfg.Mapping.Table+` ADD COLUMN created_at timestamptz NOT NULL DEFAULT now()`)
	cfg.Mapping.CreatedAt = "created_at"
	rn := &payloadRun{typ: "jsonb", cfg: cfg, topic: streamDebezium(t, cfg, env.Brokers)}
	since := time.Now().Add(-time.Minute)
	shapes := payloadShapes(t)[:6]
	var cases []payloadCase
	for _, s := range shapes {
		cases = append(cases, payloadCase{text: str(s)})
	}
	rn.insert(t, db, cases)
	col := consume(t, env.Brokers, rn.topic)
	waitFor(t, 30*time.Second, "streamed records", func() bool { return col.len() >= len(cases) })
	res, err := Republish(context.Background(), cfg, since, time.Time{}, testLogger(t))
	if err != nil || res.Published != int64(len(cases)) {
		t.Fatalf("Republish = %+v, %v", res, err)
	}
	waitFor(t, 30*time.Second, "republished records", func() bool { return col.len() >= 2*len(cases) })
	for _, msg := range col.records() {
		id, _ := header(msg, "id")
		var want []byte
		err := db.QueryRow(context.Background(), `SELECT convert_to(payload::text, 'UTF8') FROM `+cfg.Mapping.Table+` WHERE id = $1`, id).Scan(&want)
		if err != nil || !bytes.Equal(msg.Value, want) {
			t.Errorf("value %q, want %q (%v)", msg.Value, want, err)
		}
	}
}

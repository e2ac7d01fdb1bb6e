package cdc

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eventforge/eventforge/internal/shared/schemareg"
	"github.com/eventforge/eventforge/internal/testsupport/srtest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

const orderAvroV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},{"name":"qty","type":"int"},
 {"name":"note","type":["null","string"],"default":null}]}`

const orderAvroV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},{"name":"qty","type":"int"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"coupon","type":["null","string"],"default":null}]}`

// TestRelayAvroValues: with --value-schema avro the relay writes each
// payload in the registry's wire format under its subject's schema;
// a payload that does not fit goes to outbox_rejected with the path and
// reason, counted by topic, and the events around it are published; a
// registry outage ends sessions (readiness says why) without setting
// anything aside, and the events go out once it answers again.
// Confluent's Python deserializers read every record back.
func TestRelayAvroValues(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	topic := cfg.TopicPrefix + "orders"
	reg := registryEncoder(t, &cfg, schemareg.FormatAvro, 1, sr.Schema{Schema: orderAvroV1, Type: sr.TypeAvro})
	enc := cfg.Mapping.ValueEncoder.(*schemareg.Encoder)
	var down atomic.Bool
	reg.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			http.Error(w, `{"error_code":50001,"message":"down for the test"}`, http.StatusServiceUnavailable)
		}
		return down.Load()
	})
	deleteTopics(t, env.Brokers, topic)
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	insert := func(payload string, headers string) uuid.UUID {
		id := uuid.New()
		mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ($1, 'orders', 'k1', 'order.created', $2::jsonb, $3::jsonb)`, id, payload, headers)
		return id
	}
	payloads := map[uuid.UUID]string{}
	good := func(payload, headers, want string) uuid.UUID {
		id := insert(payload, headers)
		payloads[id] = want
		return id
	}
	e1 := good(`{"id":"o1","qty":1}`, `{}`, `{"id":"o1","qty":1,"note":null}`)
	bad := insert(`{"id":"o2","qty":"two"}`, `{}`)
	e3 := good(`{"id":"o3","qty":3,"note":"n"}`, `{}`, `{"id":"o3","qty":3,"note":"n"}`)
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, map[uuid.UUID]int{e1: 1, e3: 1}, 30*time.Second)
	reason := rejectedReason(t, db, bad)
	if !strings.Contains(reason, "at $.qty: expected int, got string") {
		t.Fatalf("rejected reason %q", reason)
	}
	if n := testutil.ToFloat64(enc.Registry().Rejected(topic)); n != 1 {
		t.Fatalf("schema rejections of %s: %v, want 1", topic, n)
	}

	// The outage: version 2 is registered, not yet known to the relay.
	reg.SeedSchema(topic+"-value", 2, 2, sr.Schema{Schema: orderAvroV2, Type: sr.TypeAvro})
	down.Store(true)
	e4 := good(`{"id":"o4","qty":4,"coupon":"C"}`, `{"x-eventforge-schema-version":"2"}`, `{"id":"o4","qty":4,"note":null,"coupon":"C"}`)
	e5 := good(`{"id":"o5","qty":5}`, `{}`, `{"id":"o5","qty":5,"note":null}`)
	waitFor(t, 20*time.Second, "readiness naming the registry", func() bool {
		err := r.ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "schema registry unavailable")
	})
	time.Sleep(time.Second)
	if got := rejectedCount(t, db); got != 1 {
		t.Fatalf("%d rejected during the outage, want only the mismatch", got)
	}
	down.Store(false)
	waitDistinct(t, col, map[uuid.UUID]int{e1: 1, e3: 1, e4: 1, e5: 1}, 30*time.Second)
	if got := rejectedCount(t, db); got != 1 {
		t.Fatalf("%d rejected after the outage, want 1", got)
	}

	// Confluent's deserializers read every record, v1 and v2 alike.
	var reqs []srtest.Request
	var ids []uuid.UUID
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		ids = append(ids, uuid.MustParse(id))
		reqs = append(reqs, srtest.Request{Format: "avro", Topic: topic, Value: m.Value})
	}
	for i, res := range srtest.Read(t, reg.URL(), reqs) {
		if want := payloads[ids[i]]; res.Error != "" || !srtest.JSONEqual(res.Value, []byte(want)) {
			t.Errorf("event %s: read %s %s, want %s", ids[i], res.Value, res.Error, want)
		}
	}
}

func rejectedCount(t testing.TB, db *pgx.Conn) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM outbox_rejected").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRepublishJSONSchemaValues: outbox republish writes values the way
// the stream does (the mapping's encoder, here JSON Schema): a payload
// that fits is framed, one that does not is rejected with its path.
func TestRepublishJSONSchemaValues(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	topic := cfg.TopicPrefix + "orders"
	registryEncoder(t, &cfg, schemareg.FormatJSONSchema, 7, sr.Schema{Type: sr.TypeJSON,
		Schema: `{"type":"object","properties":{"qty":{"type":"integer"}},"required":["qty"]}`})
	deleteTopics(t, env.Brokers, topic)
	db := connect(t, url)
	since := time.Now().Add(-time.Minute)
	good, bad := uuid.New(), uuid.New()
	for id, payload := range map[uuid.UUID]string{good: `{"qty": 2}`, bad: `{"qty": "2"}`} {
		mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, 'orders', 'k', 'order.created', $2::jsonb)`, id, payload)
	}
	res, err := Republish(context.Background(), cfg, since, time.Time{}, testLogger(t))
	if err != nil || res.Published != 1 || res.Rejected != 1 {
		t.Fatalf("Republish = %+v, %v; want 1 published, 1 rejected", res, err)
	}
	if reason := rejectedReason(t, db, bad); !strings.Contains(reason, "at $.qty") {
		t.Fatalf("rejected reason %q", reason)
	}
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, map[uuid.UUID]int{good: 1}, 30*time.Second)
	id, body, err := schemareg.SplitFrame(col.records()[0].Value)
	if err != nil || id != 7 || string(body) != `{"qty":2}` {
		t.Fatalf("value: id %d body %s %v", id, body, err)
	}
}

// registryEncoder serves a registry on loopback for the test, with schema
// id as version 1 of the subject of the orders topic, and sets its
// encoder of format on cfg's mapping.
func registryEncoder(t *testing.T, cfg *Config, format string, id int, schema sr.Schema) *srfake.Registry {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema(cfg.TopicPrefix+"orders-value", 1, id, schema)
	enc, err := schemareg.NewEncoder(schemareg.Config{URL: reg.URL(), Format: format, TopicPrefix: cfg.TopicPrefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Mapping.ValueEncoder = enc
	return reg
}

package worker_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/schemareg"
	"github.com/eventforge/eventforge/internal/testsupport/srtest"
	"github.com/eventforge/eventforge/worker"
)

// TestRunnerDecodesRegistryValues: with a ValueDecoder the handlers see
// the JSON of Avro, Protobuf and JSON Schema values (PostgreSQL reads it
// as jsonb); an undecodable value is poison, dead-lettered at once with
// the reason and its original bytes (which a replay would send as they
// are); a registry outage is waited out without dead letters, and the
// worker is not ready while it lasts.
func TestRunnerDecodesRegistryValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("avro-value", 1, 1, sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"O","fields":[{"name":"id","type":"string"},{"name":"n","type":"long"}]}`})
	reg.SeedSchema("proto-value", 1, 2, sr.Schema{Type: sr.TypeProtobuf,
		Schema: `syntax = "proto3"; message O { string id = 1; int64 n = 2; }`})
	reg.SeedSchema("json-value", 1, 3, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object"}`})
	var down atomic.Bool
	reg.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			http.Error(w, `{"error_code":50001,"message":"down"}`, http.StatusServiceUnavailable)
		}
		return down.Load()
	})
	encode := func(format, subject, payload string) *outbox.Event {
		enc, err := schemareg.NewEncoder(schemareg.Config{URL: reg.URL(), Format: format}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := f.orderEvent("o")
		e.AggregateType = subject
		v, _, err := enc.AppendValue(nil, &outbox.Event{AggregateType: subject, Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		e.AggregateType, e.Payload, e.PayloadKind = f.topic, v, outbox.PayloadBinary
		return e
	}
	want := map[uuid.UUID]string{}
	var evs []*outbox.Event
	add := func(e *outbox.Event, payload string) {
		evs = append(evs, e)
		want[e.ID] = payload
	}
	add(encode(schemareg.FormatAvro, "avro", `{"id":"a","n":1}`), `{"id":"a","n":1}`)
	add(encode(schemareg.FormatProtobuf, "proto", `{"id":"p","n":"2"}`), `{"id":"p","n":"2"}`)
	add(encode(schemareg.FormatJSONSchema, "json", `{"id":"j","n":3}`), `{"id":"j","n":3}`)
	poison := f.orderEvent("x")
	poison.Payload = []byte{0, 0, 0, 0, 99, 1, 2} // schema id 99: none
	poison.PayloadKind = outbox.PayloadBinary
	evs = append(evs, poison)
	produce(t, f.brokers, evs...)

	dec, err := schemareg.NewDecoder(schemareg.Config{URL: reg.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[uuid.UUID]string{}
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT $1::jsonb->>'id'`, string(ev.Payload)).Scan(&id); err != nil {
			return worker.Permanent(err)
		}
		mu.Lock()
		got[ev.ID] = string(ev.Payload)
		mu.Unlock()
		return nil
	})
	cfg := f.config()
	cfg.ValueDecoder = dec
	r := start(t, cfg, f.pool, h)
	waitFor(t, 30*time.Second, "events applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	})
	for id, p := range want {
		if !srtest.JSONEqual([]byte(got[id]), []byte(p)) {
			t.Errorf("event %s: handler saw %s, want %s", id, got[id], p)
		}
	}
	var letters []string
	waitFor(t, 30*time.Second, "the poison dead-lettered", func() bool {
		ls := deadLetters(t, f.brokers, f.topic)
		letters = letters[:0]
		for _, l := range ls {
			if l.EventID == poison.ID.String() && bytes.Equal(l.Value, poison.Payload) && bytes.Equal(encodeValue(t, l.Republish()), poison.Payload) {
				letters = append(letters, l.Error)
			}
		}
		return len(letters) == 1
	})
	if !strings.Contains(letters[0], "schema id 99") {
		t.Errorf("dead letter reason %q", letters[0])
	}

	// An outage: a new id cannot be read; nothing is dead-lettered, and
	// the event is applied once the registry answers.
	down.Store(true)
	late := encodeLate(t, reg, f, &down)
	produce(t, f.brokers, late)
	var notReady error
	waitFor(t, 30*time.Second, "not ready during the registry outage", func() bool {
		notReady = r.Ready(context.Background())
		return notReady != nil
	})
	if !strings.Contains(notReady.Error(), "schema-registry outage") {
		t.Errorf("Ready during the registry outage = %v", notReady)
	}
	if n := len(deadLetters(t, f.brokers, f.topic)); n != 1 {
		t.Fatalf("%d dead letters during the outage, want 1", n)
	}
	down.Store(false)
	waitFor(t, 30*time.Second, "the late event applied", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got[late.ID] != ""
	})
	waitFor(t, 10*time.Second, "ready once the registry answers", func() bool { return r.Ready(context.Background()) == nil })
}

// encodeLate encodes under a schema registered while the registry is down
// for the worker (the interceptor is lifted for the encoder's request).
func encodeLate(t *testing.T, reg *srfake.Registry, f *fixture, down *atomic.Bool) *outbox.Event {
	t.Helper()
	reg.SeedSchema("late-value", 1, 4, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object"}`})
	down.Store(false)
	enc, err := schemareg.NewEncoder(schemareg.Config{URL: reg.URL(), Format: schemareg.FormatJSONSchema}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := enc.AppendValue(nil, &outbox.Event{AggregateType: "late", Payload: []byte(`{"id":"late"}`)})
	down.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	e := f.orderEvent("late")
	e.Payload, e.PayloadKind = v, outbox.PayloadBinary
	return e
}

func encodeValue(t *testing.T, m *sarama.ProducerMessage) []byte {
	t.Helper()
	b, err := m.Value.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

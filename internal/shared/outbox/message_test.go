package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

func headerMap(hs []sarama.RecordHeader) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[string(h.Key)] = string(h.Value)
	}
	return m
}

func TestMessageFollowsTheContract(t *testing.T) {
	id := uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	commit := time.Date(2026, 12, 2, 10, 0, 0, 123000, time.UTC)
	e := &Event{
		ID: id, AggregateType: "orders", AggregateID: "o-1", EventType: "order.created",
		Payload:    []byte(`{"id": "o-1", "amount": 1250, "nested": {"a": [1, 2]}}`),
		Headers:    map[string]string{"traceparent": "00-abc-def-01", "event_id": "spoofed", "b": "2"},
		CommitTime: commit,
	}
	msg, err := Message(e, "prod.")
	if err != nil {
		t.Fatal(err)
	}
	if msg.Topic != "prod.orders" {
		t.Errorf("topic = %q", msg.Topic)
	}
	key, _ := msg.Key.Encode()
	value, _ := msg.Value.Encode()
	if string(key) != "o-1" {
		t.Errorf("key = %q", key)
	}
	if want := `{"id":"o-1","amount":1250,"nested":{"a":[1,2]}}`; string(value) != want {
		t.Errorf("value = %s, want %s", value, want)
	}
	if !msg.Timestamp.Equal(commit) {
		t.Errorf("timestamp = %v, want %v", msg.Timestamp, commit)
	}
	got := headerMap(msg.Headers)
	want := map[string]string{"event_id": id.String(), "event_type": "order.created", "aggregate_type": "orders", "traceparent": "00-abc-def-01", "b": "2"}
	if len(got) != len(want) || len(msg.Headers) != len(want) {
		t.Fatalf("headers = %v, want %v", msg.Headers, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if string(msg.Headers[0].Key) != HeaderEventID || string(msg.Headers[3].Key) != "b" {
		t.Errorf("header order = %v: contract headers first, then the rest by name", msg.Headers)
	}
}

func TestMessageRefusesInvalidPayload(t *testing.T) {
	if _, err := Message(&Event{Payload: []byte(`{"a":`)}, ""); err == nil {
		t.Fatal("invalid JSON payload accepted")
	}
}

func TestStringHeaders(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		want    map[string]string
		wantErr bool
	}{
		{"", nil, false},
		{"{}", nil, false},
		{`{"a":"x","n":1,"o":{"p":"q"},"nil":null,"b":""}`, map[string]string{"a": "x", "b": ""}, false},
		{`[1,2]`, nil, false},
		{` "s" `, nil, false},
		{`null`, nil, false},
		{`[1,`, nil, true},
		{`{"deep":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, nil, true},
		{`{"a":`, nil, true},
	} {
		got, err := StringHeaders([]byte(tc.raw))
		if (err != nil) != tc.wantErr {
			t.Errorf("StringHeaders(%q) err = %v, wantErr %v", tc.raw, err, tc.wantErr)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("StringHeaders(%q) = %v, want %v", tc.raw, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("StringHeaders(%q)[%s] = %q, want %q", tc.raw, k, got[k], v)
			}
		}
	}
}

func TestParseRoundTripsMessage(t *testing.T) {
	e := &Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-9", EventType: "order.created",
		Payload: []byte(`{"x":1}`), Headers: map[string]string{"traceparent": "t"}}
	msg, err := Message(e, "")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := msg.Key.Encode()
	value, _ := msg.Value.Encode()
	var hs []*sarama.RecordHeader
	for i := range msg.Headers {
		hs = append(hs, &msg.Headers[i])
	}
	got, err := Parse(key, value, hs)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != e.ID || got.AggregateID != e.AggregateID || got.AggregateType != e.AggregateType ||
		got.EventType != e.EventType || string(got.Payload) != string(e.Payload) || got.Headers["traceparent"] != "t" {
		t.Fatalf("Parse(Message(e)) = %+v, want %+v", got, e)
	}
}

func TestParseRefusesMalformedRecords(t *testing.T) {
	h := func(k, v string) *sarama.RecordHeader { return &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	good := uuid.NewString()
	for _, tc := range []struct {
		name    string
		value   string
		headers []*sarama.RecordHeader
	}{
		{"no event_id", `{}`, []*sarama.RecordHeader{h("event_type", "x")}},
		{"event_id not a UUID", `{}`, []*sarama.RecordHeader{h("event_id", "order-1")}},
		{"payload not JSON", `{"a":`, []*sarama.RecordHeader{h("event_id", good)}},
		{"empty payload", ``, []*sarama.RecordHeader{h("event_id", good)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("k"), []byte(tc.value), tc.headers)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// FuzzMessage checks the outbox-row → Kafka-record mapping never panics, and
// that whatever it accepts parses back to the same event.
func FuzzMessage(f *testing.F) {
	f.Add("orders", "o-1", "order.created", `{"a": 1}`, `{"traceparent":"x"}`)
	f.Add("", "", "", `[]`, `{}`)
	f.Add("t", "k", "e", `"s"`, `{"event_id":"spoof","n":1}`)
	// Rows of cdc/hostile_test.go, as PostgreSQL's jsonb output sends them.
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	f.Add("orders", "", "", deep(10001), `{"deep": `+deep(10001)+`}`)
	f.Add("bad topic!", strings.Repeat("k", 5000), "t\x01\n", deep(5000), `{"": "empty name", "a": ["x"], "b": true, "f": 1.5, "n": 1, "o": {"k": "v"}, "s": "str", "z": null}`)
	f.Add("__consumer_offsets", "k\x01\x1f\x7f\t é\u2028😀", "e", `{"e": 1000, "n": 1.50, "s": "a\u0001b\u001f\n\t\"\\ é", "big": 123456789012345678901234567890}`, `{"h\u0002": "a\u0001\u001fb\n"}`)
	f.Add("o", "k\x00\xff", "e", `"\ud800"`, `{"h": "\u0000", "i": "\udc00"}`)
	f.Add("o", "k", "e", `{"a": 1}`, `[1, "x"]`)
	f.Fuzz(func(t *testing.T, aggType, aggID, evType, payload, headers string) {
		hs, err := StringHeaders([]byte(headers))
		if err != nil {
			return
		}
		e := &Event{ID: uuid.New(), AggregateType: aggType, AggregateID: aggID, EventType: evType, Payload: []byte(payload), Headers: hs}
		msg, err := Message(e, "")
		if err != nil {
			return
		}
		key, _ := msg.Key.Encode()
		value, _ := msg.Value.Encode()
		var rh []*sarama.RecordHeader
		for i := range msg.Headers {
			rh = append(rh, &msg.Headers[i])
		}
		back, err := Parse(key, value, rh)
		if err != nil {
			t.Fatalf("Parse of a built message: %v", err)
		}
		if back.ID != e.ID || back.AggregateID != aggID || back.EventType != evType || back.AggregateType != aggType {
			t.Fatalf("round trip changed the event: %+v vs %+v", back, e)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(payload)); err != nil || !bytes.Equal(value, compact.Bytes()) {
			t.Fatalf("value %q is not the compacted payload %q", value, payload)
		}
		for k, v := range hs {
			if !reserved[k] && back.Headers[k] != v {
				t.Fatalf("header %q = %q, want %q", k, back.Headers[k], v)
			}
		}
		if len(back.Headers) > len(hs) {
			t.Fatalf("headers %v from a column with %v", back.Headers, hs)
		}
	})
}

// FuzzParse checks the worker-side parsing of arbitrary records never panics
// and that every refusal is ErrMalformed.
func FuzzParse(f *testing.F) {
	f.Add([]byte("k"), []byte(`{}`), "event_id", "0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	f.Add([]byte(nil), []byte(nil), "", "")
	f.Fuzz(func(t *testing.T, key, value []byte, hk, hv string) {
		_, err := Parse(key, value, []*sarama.RecordHeader{{Key: []byte(hk), Value: []byte(hv)}, nil})
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
	})
}

// TestBuilderMatchesMessage checks the relay's Builder yields Message's
// record, and that the record keeps no reference to the event's buffers.
func TestBuilderMatchesMessage(t *testing.T) {
	id := uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	bld := NewBuilder("p.")
	for _, tc := range []struct {
		name string
		e    Event
	}{
		{"plain", Event{ID: id, AggregateType: "orders", AggregateID: "o-1", EventType: "order.created", Payload: []byte(`{"a": [1, 2], "s": "x y"}`)}},
		{"headers", Event{ID: id, AggregateType: "orders", AggregateID: "o-2", EventType: "e", Payload: []byte(`1`),
			Headers: map[string]string{"z": "1", "a": "2", "event_type": "spoof"}}},
		{"empty strings", Event{AggregateType: "t", Payload: []byte(` "" `)}},
		{"other type", Event{ID: id, AggregateType: "customers", AggregateID: "c", EventType: "e", Payload: []byte(`{}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := Message(&tc.e, "p.")
			if err != nil {
				t.Fatal(err)
			}
			e := tc.e
			e.Payload = bytes.Clone(tc.e.Payload)
			e.AggregateID = strings.Clone(tc.e.AggregateID)
			var r Record
			if err := bld.Build(&r, &e); err != nil {
				t.Fatal(err)
			}
			for i := range e.Payload {
				e.Payload[i] = 'X' // the relay's receive buffer is reused
			}
			got := &r.Msg
			if got.Topic != want.Topic || !got.Timestamp.Equal(want.Timestamp) {
				t.Errorf("topic %q time %v, want %q %v", got.Topic, got.Timestamp, want.Topic, want.Timestamp)
			}
			for _, enc := range [][2]sarama.Encoder{{got.Key, want.Key}, {got.Value, want.Value}} {
				g, _ := enc[0].Encode()
				w, _ := enc[1].Encode()
				if !bytes.Equal(g, w) || enc[0].Length() != len(w) {
					t.Errorf("encoded %q (length %d), want %q", g, enc[0].Length(), w)
				}
			}
			if len(got.Headers) != len(want.Headers) {
				t.Fatalf("headers %v, want %v", got.Headers, want.Headers)
			}
			for i := range got.Headers {
				if string(got.Headers[i].Key) != string(want.Headers[i].Key) || string(got.Headers[i].Value) != string(want.Headers[i].Value) {
					t.Errorf("header %d = %s:%s, want %s:%s", i, got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Key, want.Headers[i].Value)
				}
			}
			if got.ByteSize(2) != want.ByteSize(2) {
				t.Errorf("ByteSize %d, want %d", got.ByteSize(2), want.ByteSize(2))
			}
		})
	}
}

func TestAppendUUIDIsUUIDString(t *testing.T) {
	for range 100 {
		id := uuid.New()
		_, got := AppendUUID(nil, id)
		if string(got) != id.String() {
			t.Fatalf("appendUUID = %s, want %s", got, id)
		}
	}
}

// TestRecordReuse: a Record built again after Reuse gives the same record
// as a fresh one, for events in turn that each need more or less room,
// without allocating once its buffer fits (under the race detector, whose
// sync.Pool drops scratch at random, most builds); a buffer above
// maxReusedBuffer is let go.
func TestRecordReuse(t *testing.T) {
	id := uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	events := []Event{
		{ID: id, AggregateType: "orders", AggregateID: "o-1", EventType: "order.created", Payload: []byte(`{"a": [1, 2], "s": "x y"}`)},
		{ID: id, AggregateType: "orders", AggregateID: "o-22222", EventType: "e", Payload: []byte(`{"long": "` + strings.Repeat("v", 300) + `"}`)},
		{ID: id, AggregateType: "t", AggregateID: "k", EventType: "e", Payload: []byte(`1`), Headers: map[string]string{"z": "1"}},
	}
	bld := NewBuilder("p.")
	var r Record
	for round := range 2 {
		for i := range events {
			r.Reuse()
			if err := bld.Build(&r, &events[i]); err != nil {
				t.Fatal(err)
			}
			var fresh Record
			if err := bld.Build(&fresh, &events[i]); err != nil {
				t.Fatal(err)
			}
			if g, w := recordText(&r.Msg), recordText(&fresh.Msg); g != w {
				t.Errorf("round %d, event %d: reused %s, fresh %s", round, i, g, w)
			}
		}
	}
	rebuild := func() {
		r.Reuse()
		if err := bld.Build(&r, &events[0]); err != nil {
			t.Fatal(err)
		}
	}
	if !raceDetector {
		if allocs := testing.AllocsPerRun(100, rebuild); allocs != 0 {
			t.Errorf("building into a reused record: %v allocations, want 0", allocs)
		}
	} else if free := allocFreeRuns(100, rebuild); free < 25 {
		// About 3 in 4 builds find encoding/json's scanner pooled.
		t.Errorf("building into a reused record: %d of 100 builds without allocations, want most", free)
	}
	big := Event{ID: id, AggregateType: "orders", AggregateID: "o-4", EventType: "e", Payload: []byte(`"` + strings.Repeat("b", 2*maxReusedBuffer) + `"`)}
	if err := bld.Build(&r, &big); err != nil {
		t.Fatal(err)
	}
	r.Reuse()
	if r.buf != nil {
		t.Errorf("Reuse kept a buffer of %d bytes, the most is %d", cap(r.buf), maxReusedBuffer)
	}
}

// allocFreeRuns is how many of n runs of f allocate nothing.
func allocFreeRuns(n int, f func()) int {
	free := 0
	for range n {
		if testing.AllocsPerRun(1, f) == 0 {
			free++
		}
	}
	return free
}

// recordText is msg's topic, key, value and headers as text.
func recordText(msg *sarama.ProducerMessage) string {
	text := func(enc sarama.Encoder) string {
		if enc == nil {
			return "<nil>"
		}
		b, _ := enc.Encode()
		return string(b)
	}
	s := msg.Topic + " " + text(msg.Key) + " " + text(msg.Value)
	for _, h := range msg.Headers {
		s += " " + string(h.Key) + "=" + string(h.Value)
	}
	return s
}

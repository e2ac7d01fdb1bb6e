package outbox

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

func build(t testing.TB, format string, e *Event) *sarama.ProducerMessage {
	t.Helper()
	m := DefaultMapping()
	m.Format, m.CloudEventsSource = format, "/orders-service"
	var r Record
	if err := NewBuilder("p.").WithFormat(&m).Build(&r, e); err != nil {
		t.Fatal(err)
	}
	return &r.Msg
}

func encoded(t testing.TB, enc sarama.Encoder) []byte {
	t.Helper()
	if enc == nil {
		return nil
	}
	b, err := enc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toConsumed(msg *sarama.ProducerMessage) []*sarama.RecordHeader {
	var rh []*sarama.RecordHeader
	for i := range msg.Headers {
		rh = append(rh, &msg.Headers[i])
	}
	return rh
}

// TestCloudEventsBinaryMode checks the record against the CloudEvents Kafka
// protocol binding, binary content mode: attributes as ce_-prefixed
// headers, data as the value as is, its media type in content-type, the
// event's key as the record key (and as the partitionkey extension).
func TestCloudEventsBinaryMode(t *testing.T) {
	id := uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	commit := time.Date(2026, 12, 2, 10, 0, 0, 123456000, time.FixedZone("CET", 3600))
	cases := []struct {
		name        string
		kind        PayloadKind
		payload     []byte
		contentType string
		value       []byte
	}{
		{"jsonb", PayloadJSON, []byte(`{"a": 1}`), "application/json", []byte(`{"a":1}`)},
		{"text JSON", PayloadText, []byte(`{"a": 1}`), "application/json", []byte(`{"a": 1}`)},
		{"text", PayloadText, []byte("hello"), "text/plain; charset=utf-8", []byte("hello")},
		{"bytea", PayloadBinary, []byte{0xff, 0x00, 0xfe}, "application/octet-stream", []byte{0xff, 0x00, 0xfe}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &Event{ID: id, AggregateType: "orders", AggregateID: "o-1", EventType: "order.created",
				Payload: tc.payload, PayloadKind: tc.kind, CommitTime: commit,
				Headers: map[string]string{"traceparent": "00-1", "ce_id": "spoof", "content-type": "spoof", "event_id": "spoof"}}
			msg := build(t, FormatCloudEvents, e)
			if msg.Topic != "p.orders" || string(encoded(t, msg.Key)) != "o-1" || !bytes.Equal(encoded(t, msg.Value), tc.value) {
				t.Fatalf("topic %s key %q value %q", msg.Topic, encoded(t, msg.Key), encoded(t, msg.Value))
			}
			want := []string{
				"ce_id", id.String(), "ce_source", "/orders-service", "ce_specversion", "1.0", "ce_type", "order.created",
				"ce_time", "2026-12-02T09:00:00.123456Z", "ce_subject", "o-1", "ce_partitionkey", "o-1",
				"content-type", tc.contentType, "traceparent", "00-1",
			}
			var got []string
			for _, h := range msg.Headers {
				got = append(got, string(h.Key), string(h.Value))
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("headers\n%q\nwant\n%q", got, want)
			}
			if _, err := time.Parse(time.RFC3339, string(msg.Headers[4].Value)); err != nil {
				t.Fatalf("ce_time is not RFC 3339: %v", err)
			}
			back, err := Parse(encoded(t, msg.Key), encoded(t, msg.Value), toConsumed(msg))
			if err != nil {
				t.Fatal(err)
			}
			if back.ID != id || back.EventType != "order.created" || back.AggregateID != "o-1" || !bytes.Equal(back.Payload, tc.value) {
				t.Fatalf("parsed back %+v", back)
			}
			if _, ok := back.Headers["ce_id"]; ok {
				t.Fatal("ce_id used as the id stays among the headers")
			}
		})
	}
}

func TestDebeziumRecord(t *testing.T) {
	id := uuid.New()
	e := &Event{ID: id, AggregateType: "Order", AggregateID: "42", EventType: "OrderCreated",
		Payload: []byte(`{"id": 42}`), Headers: map[string]string{"tenant": "acme", "id": "spoof", "event_id": "spoof"}}
	msg := build(t, FormatDebezium, e)
	// The value is PostgreSQL's text of the payload, unchanged, as the
	// router writes it with StringConverter: not compacted.
	if msg.Topic != "p.Order" || string(encoded(t, msg.Key)) != "42" || string(encoded(t, msg.Value)) != `{"id": 42}` {
		t.Fatalf("record %s %q %q", msg.Topic, encoded(t, msg.Key), encoded(t, msg.Value))
	}
	if len(msg.Headers) != 2 || string(msg.Headers[0].Key) != "id" || string(msg.Headers[0].Value) != id.String() ||
		string(msg.Headers[1].Key) != "tenant" {
		t.Fatalf("headers %v", headerMap(msg.Headers))
	}
	back, err := Parse(encoded(t, msg.Key), encoded(t, msg.Value), toConsumed(msg))
	if err != nil || back.ID != id {
		t.Fatalf("parse: %+v %v", back, err)
	}
	// A NULL payload under the tombstone policy: no value at all.
	e.NoPayload, e.Payload = true, nil
	if msg := build(t, FormatDebezium, e); msg.Value != nil {
		t.Fatalf("tombstone value %v", msg.Value)
	}
}

// TestBinaryPayloadIsByteExact: bytea that is not UTF-8 (nor JSON) is the
// value byte for byte in every format.
func TestBinaryPayloadIsByteExact(t *testing.T) {
	raw := []byte{0xff, 0x00, 0xfe}
	for _, f := range []string{FormatEventForge, FormatCloudEvents, FormatDebezium} {
		e := &Event{ID: uuid.New(), AggregateType: "t", AggregateID: "k", EventType: "e", Payload: bytes.Clone(raw), PayloadKind: PayloadBinary}
		msg := build(t, f, e)
		e.Payload[0] = 'X' // the record must not alias the event
		if got := encoded(t, msg.Value); !bytes.Equal(got, raw) || msg.Value.Length() != len(raw) {
			t.Errorf("%s: value %x, want %x", f, got, raw)
		}
	}
}

func TestParseContentType(t *testing.T) {
	id := uuid.NewString()
	h := func(k, v string) *sarama.RecordHeader { return &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	cases := []struct {
		name  string
		value []byte
		hs    []*sarama.RecordHeader
		ok    bool
	}{
		{"octet stream", []byte{0xff, 0}, []*sarama.RecordHeader{h("ce_id", id), h("content-type", "application/octet-stream")}, true},
		{"json not JSON", []byte{0xff}, []*sarama.RecordHeader{h("ce_id", id), h("content-type", "Application/JSON; charset=utf-8")}, false},
		{"+json", []byte(`{}`), []*sarama.RecordHeader{h("ce_id", id), h("content-type", "application/cloudevents+json")}, true},
		{"no content type", []byte("x"), []*sarama.RecordHeader{h("ce_id", id)}, false},
		{"debezium id", []byte(`1`), []*sarama.RecordHeader{h("id", id)}, true},
		{"event_id wins", []byte(`1`), []*sarama.RecordHeader{h("id", "nope"), h("event_id", id)}, true},
	}
	for _, tc := range cases {
		e, err := Parse([]byte("k"), tc.value, tc.hs)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if err == nil && e.ID.String() != id {
			t.Errorf("%s: id %s", tc.name, e.ID)
		}
	}
}

// FuzzRecordFormats builds records of every format from arbitrary events
// and parses them back: the id, key and value survive, and for the formats
// that carry it, the event type.
func FuzzRecordFormats(f *testing.F) {
	f.Add("orders", "o-1", "order.created", []byte(`{"a": 1}`), uint8(0), `{"traceparent":"x","ce_id":"s","id":"s"}`)
	f.Add("t", "", "", []byte{0xff, 0x00, 0xfe}, uint8(2), `{}`)
	f.Add("t", "k", "e", []byte("plain"), uint8(1), `{"content-type":"x"}`)
	f.Fuzz(func(t *testing.T, aggType, aggID, evType string, payload []byte, kind uint8, headers string) {
		hs, err := StringHeaders([]byte(headers))
		if err != nil {
			return
		}
		for _, format := range []string{FormatEventForge, FormatCloudEvents, FormatDebezium} {
			e := &Event{ID: uuid.New(), AggregateType: aggType, AggregateID: aggID, EventType: evType,
				Payload: payload, PayloadKind: PayloadKind(kind % 3), Headers: hs}
			m := DefaultMapping()
			m.Format = format
			var r Record
			if err := NewBuilder("").WithFormat(&m).Build(&r, e); err != nil {
				continue // payload of kind JSON that is not JSON
			}
			value := encoded(t, r.Msg.Value)
			if e.PayloadKind != PayloadJSON && !bytes.Equal(value, payload) {
				t.Fatalf("%s: value %q, payload %q", format, value, payload)
			}
			back, err := Parse(encoded(t, r.Msg.Key), value, toConsumed(&r.Msg))
			if err != nil {
				continue // a non-JSON payload without a content-type saying so
			}
			if back.ID != e.ID || back.AggregateID != aggID || format != FormatDebezium && back.EventType != evType {
				t.Fatalf("%s: round trip %+v from %+v", format, back, e)
			}
		}
	})
}

func TestEventIDHeader(t *testing.T) {
	h := func(k, v string) *sarama.RecordHeader { return &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	for _, tc := range []struct {
		hs   []*sarama.RecordHeader
		want string
		ok   bool
	}{
		{nil, "", false},
		{[]*sarama.RecordHeader{h("x", "1"), nil}, "", false},
		{[]*sarama.RecordHeader{h("id", "d"), h("ce_id", "c"), h("event_id", "e1"), h("event_id", "e2")}, "e2", true},
		{[]*sarama.RecordHeader{h("ce_id", "c1"), h("id", "d"), h("ce_id", "c2")}, "c2", true},
		{[]*sarama.RecordHeader{h("id", "d")}, "d", true},
	} {
		got, ok := EventIDHeader(tc.hs)
		if got != tc.want || ok != tc.ok {
			t.Errorf("EventIDHeader(%v) = %q, %v; want %q, %v", tc.hs, got, ok, tc.want, tc.ok)
		}
	}
}

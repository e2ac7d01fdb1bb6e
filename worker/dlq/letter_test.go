package dlq

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

func consumed(t testing.TB, e *outbox.Event, partition int32, offset int64) *sarama.ConsumerMessage {
	t.Helper()
	pm, err := outbox.Message(e, "")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := pm.Key.Encode()
	value, _ := pm.Value.Encode()
	m := &sarama.ConsumerMessage{Topic: pm.Topic, Partition: partition, Offset: offset, Key: key, Value: value, Timestamp: e.CommitTime}
	for _, h := range pm.Headers {
		m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return m
}

// produced turns a producer message back into what a consumer reads.
func produced(t testing.TB, pm *sarama.ProducerMessage, partition int32, offset int64) *sarama.ConsumerMessage {
	t.Helper()
	m := &sarama.ConsumerMessage{Topic: pm.Topic, Partition: partition, Offset: offset, Timestamp: pm.Timestamp}
	if pm.Key != nil {
		m.Key, _ = pm.Key.Encode()
	}
	if pm.Value != nil {
		m.Value, _ = pm.Value.Encode()
	}
	for _, h := range pm.Headers {
		m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return m
}

func testEvent() *outbox.Event {
	return &outbox.Event{
		ID: uuid.MustParse("0190f1a2-0000-7000-8000-000000000001"), AggregateType: "orders", AggregateID: "o-1",
		EventType: "order.created", Payload: []byte(`{"amount": 5}`), Headers: map[string]string{"trace": "t1"},
		CommitTime: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestMessageRoundTrip(t *testing.T) {
	orig := consumed(t, testEvent(), 2, 41)
	pm := Message(orig, Info{Error: "order missing", Attempts: 3, Consumer: "c1"})
	if pm.Topic != "orders.dlq" || pm.Partition != 2 || !pm.Timestamp.Equal(orig.Timestamp) {
		t.Fatalf("dead letter goes to %s partition %d at %v", pm.Topic, pm.Partition, pm.Timestamp)
	}
	l := Decode(produced(t, pm, 2, 7))
	want := Letter{
		Topic: "orders.dlq", Partition: 2, Offset: 7, Timestamp: orig.Timestamp,
		EventID: "0190f1a2-0000-7000-8000-000000000001", ValidID: true,
		Error: "order missing", Attempts: 3, OriginalTopic: "orders", OriginalPartition: 2, OriginalOffset: 41, Consumer: "c1",
	}
	got := l
	got.Key, got.Value, got.Headers = nil, nil, nil
	if got.Topic != want.Topic || got.EventID != want.EventID || !got.ValidID || got.Error != want.Error ||
		got.Attempts != want.Attempts || got.OriginalTopic != want.OriginalTopic || got.OriginalPartition != want.OriginalPartition ||
		got.OriginalOffset != want.OriginalOffset || got.Consumer != want.Consumer || got.Offset != want.Offset {
		t.Fatalf("Decode = %+v\nwant %+v", got, want)
	}
	// Republishing gives back the original record, headers in order, and
	// marks it replayed.
	back := produced(t, l.Republish(), 0, 0)
	last := back.Headers[len(back.Headers)-1]
	if string(last.Key) != HeaderReplay || string(last.Value) != fmt.Sprintf("%s/%d@%d", l.Topic, l.Partition, l.Offset) {
		t.Fatalf("last republished header %s:%s, want the replay mark", last.Key, last.Value)
	}
	back.Headers = back.Headers[:len(back.Headers)-1]
	if back.Topic != "orders" || !bytes.Equal(back.Key, orig.Key) || !bytes.Equal(back.Value, orig.Value) || !back.Timestamp.Equal(orig.Timestamp) {
		t.Fatalf("republished %s key %q value %q", back.Topic, back.Key, back.Value)
	}
	if len(back.Headers) != len(orig.Headers) {
		t.Fatalf("republished %d headers, want %d", len(back.Headers), len(orig.Headers))
	}
	for i := range orig.Headers {
		if !bytes.Equal(back.Headers[i].Key, orig.Headers[i].Key) || !bytes.Equal(back.Headers[i].Value, orig.Headers[i].Value) {
			t.Errorf("header %d = %s:%s, want %s:%s", i, back.Headers[i].Key, back.Headers[i].Value, orig.Headers[i].Key, orig.Headers[i].Value)
		}
	}
}

func TestMessageReplacesOldDeadLetterHeaders(t *testing.T) {
	orig := consumed(t, testEvent(), 0, 1)
	first := produced(t, Message(orig, Info{Error: "first", Attempts: 1}), 0, 0)
	first.Topic = "orders" // as if replayed without stripping
	second := Message(first, Info{Error: "second", Attempts: 2})
	count := 0
	for _, h := range second.Headers {
		if string(h.Key) == outbox.HeaderDLQError {
			count++
			if string(h.Value) != "second" {
				t.Errorf("error header = %q", h.Value)
			}
		}
	}
	if count != 1 {
		t.Errorf("%d error headers, want 1", count)
	}
}

func TestMessageKeepsNilKey(t *testing.T) {
	pm := Message(&sarama.ConsumerMessage{Topic: "t", Value: []byte("x")}, Info{})
	if pm.Key != nil {
		t.Error("a keyless record gained a key")
	}
}

func TestDecodeForeignRecord(t *testing.T) {
	l := Decode(&sarama.ConsumerMessage{Topic: "x.dlq", Headers: []*sarama.RecordHeader{
		{Key: []byte(outbox.HeaderEventID), Value: []byte("not-a-uuid")},
		{Key: []byte(outbox.HeaderDLQAttempts), Value: []byte("many")},
		nil,
	}})
	if l.ValidID || l.EventID != "not-a-uuid" || l.Attempts != -1 || l.OriginalPartition != -1 || l.OriginalOffset != -1 {
		t.Errorf("Decode = %+v", l)
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", MaxErrorBytes) // 2 bytes each
	got := truncate(long, MaxErrorBytes)
	if len(got) > MaxErrorBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if truncate("short", 10) != "short" {
		t.Error("short strings stay")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("event_id"), []byte("0190f1a2-0000-7000-8000-000000000001"), []byte(outbox.HeaderDLQOriginalOffset), []byte("12"))
	f.Add([]byte(outbox.HeaderDLQAttempts), []byte("-9999999999999"), []byte(outbox.HeaderDLQOriginalPartition), []byte("x"))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 []byte) {
		m := &sarama.ConsumerMessage{Topic: "t.dlq", Headers: []*sarama.RecordHeader{{Key: k1, Value: v1}, {Key: k2, Value: v2}}}
		l := Decode(m)
		for _, h := range l.Headers {
			if bytes.HasPrefix(h.Key, []byte(headerPrefix)) {
				t.Fatalf("kept dead-letter header %q", h.Key)
			}
		}
		if l.ValidID {
			if _, err := uuid.Parse(l.EventID); err != nil {
				t.Fatalf("ValidID with %q", l.EventID)
			}
		}
		// A dead letter of the dead letter decodes to the new values.
		again := Decode(produced(t, Message(m, Info{Error: "e", Attempts: 4, Consumer: "c"}), 0, 0))
		if again.Attempts != 4 || again.Error != "e" || again.Consumer != "c" || again.OriginalTopic != "t.dlq" {
			t.Fatalf("re-dead-lettered: %+v", again)
		}
	})
}

func TestDecodeCloudEventsLetter(t *testing.T) {
	id := uuid.NewString()
	l := Decode(&sarama.ConsumerMessage{Topic: "x.dlq", Headers: []*sarama.RecordHeader{
		{Key: []byte(outbox.HeaderCEID), Value: []byte(id)},
		{Key: []byte(outbox.HeaderCEType), Value: []byte("order.created")},
	}})
	if l.EventID != id || !l.ValidID {
		t.Errorf("Decode = %+v, want event id %s from ce_id", l, id)
	}
}

package worker

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// FuzzDecodeRecord feeds decode (a consumed Kafka record → Event) records
// from any producer: any key, value and headers, nil or duplicated ones
// included. It must never panic; a refusal wraps outbox.ErrMalformed (the
// record is dead-lettered); an accepted record keeps its key, value and
// position byte for byte, and its id is the last event_id header, else
// (CloudEvents, Debezium) the last ce_id header, else the last id header.
func FuzzDecodeRecord(f *testing.F) {
	id := "0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21"
	f.Add([]byte("o-1"), []byte(`{"a":1}`), "event_id\x00"+id+"\x00event_type\x00order.created\x00aggregate_type\x00orders", false)
	f.Add([]byte(nil), []byte(nil), "", true)
	f.Add([]byte(""), []byte(`[[[[]]]]`), "event_id\x00"+id+"\x00\x00", false)
	f.Add([]byte(strings.Repeat("k", 1000)), []byte(strings.Repeat("[", 10001)+strings.Repeat("]", 10001)), "event_id\x00"+id, false)
	f.Add([]byte("k\x00\xff"), []byte(`"\ud800"`), "event_id\x00{"+id+"}\x00event_id\x00urn:uuid:"+id+"\x00h\x01\x00\xff", false)
	f.Add([]byte("k"), []byte(`{}`), "event_id\x00not-a-uuid", false)
	f.Add([]byte("k"), []byte(`{"a":`), "event_id\x00"+id+"\x00traceparent\x0000-abc-def-01", false)
	f.Add([]byte("o-1"), []byte{0xff, 0x00, 0xfe}, "ce_id\x00"+id+"\x00ce_type\x00t\x00content-type\x00application/octet-stream", false)
	f.Add([]byte("o-1"), []byte(`{}`), "ce_id\x00x\x00ce_id\x00"+id+"\x00id\x00"+id, false)
	f.Fuzz(func(t *testing.T, key, value []byte, headers string, nilHeader bool) {
		m := &sarama.ConsumerMessage{Topic: "orders", Partition: 3, Offset: 42, Key: key, Value: value}
		parts := strings.Split(headers, "\x00")
		last := map[string]string{}
		for i := 0; i+1 < len(parts); i += 2 {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(parts[i]), Value: []byte(parts[i+1])})
			last[parts[i]] = parts[i+1]
		}
		lastID, haveID := "", false
		for _, name := range []string{outbox.HeaderEventID, outbox.HeaderCEID, outbox.HeaderDebeziumID} {
			if v, ok := last[name]; ok {
				lastID, haveID = v, true
				break
			}
		}
		if nilHeader {
			m.Headers = append(m.Headers, nil)
		}
		if got, ok := outbox.EventIDHeader(m.Headers); got != lastID || ok != haveID {
			t.Fatalf("EventIDHeader = %q, %v; want %q, %v", got, ok, lastID, haveID)
		}
		ev, err := decode(m)
		if err != nil {
			if !errors.Is(err, outbox.ErrMalformed) {
				t.Fatalf("refusal %v does not wrap outbox.ErrMalformed", err)
			}
			return
		}
		if !haveID {
			t.Fatal("accepted a record without an event id header")
		}
		if want, err := uuid.Parse(lastID); err != nil || ev.ID != want {
			t.Fatalf("event id %s, last event id header %q", ev.ID, lastID)
		}
		if ev.AggregateID != string(key) || !bytes.Equal(ev.Payload, value) {
			t.Fatalf("key or value changed: %q %q", ev.AggregateID, ev.Payload)
		}
		if ev.Topic != m.Topic || ev.Partition != m.Partition || ev.Offset != m.Offset {
			t.Fatalf("position changed: %s/%d/%d", ev.Topic, ev.Partition, ev.Offset)
		}
	})
}

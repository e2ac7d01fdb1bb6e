package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker/dlq"
)

// consumed is the record the relay writes for e, as the consumer reads it.
func consumed(tb testing.TB, e *outbox.Event) *sarama.ConsumerMessage {
	tb.Helper()
	pm, err := outbox.Message(e, "")
	if err != nil {
		tb.Fatal(err)
	}
	key, _ := pm.Key.Encode()
	value, _ := pm.Value.Encode()
	m := &sarama.ConsumerMessage{Topic: "orders", Partition: 3, Offset: 42, Key: key, Value: value, Timestamp: e.CommitTime}
	for i := range pm.Headers {
		m.Headers = append(m.Headers, &pm.Headers[i])
	}
	return m
}

func TestDecode(t *testing.T) {
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-1", EventType: "order.created",
		Payload: []byte(`{"id":"o-1"}`), Headers: map[string]string{"traceparent": "00-a-b-01"}, CommitTime: time.Unix(1700000000, 0)}
	ev, err := decode(consumed(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != e.ID || ev.AggregateID != "o-1" || ev.EventType != "order.created" || string(ev.Payload) != `{"id":"o-1"}` ||
		ev.Headers["traceparent"] != "00-a-b-01" || !ev.CommitTime.Equal(e.CommitTime) ||
		ev.Topic != "orders" || ev.Partition != 3 || ev.Offset != 42 {
		t.Errorf("decode = %+v", ev)
	}
	if ev.Replayed {
		t.Error("a relayed record decoded as replayed")
	}
	replayed := consumed(t, e)
	replayed.Headers = append(replayed.Headers, &sarama.RecordHeader{Key: []byte(dlq.HeaderReplay), Value: []byte("orders.dlq/3@7")})
	if ev, err := decode(replayed); err != nil || !ev.Replayed || len(ev.Headers) != 1 {
		t.Errorf("decode of a replayed record = %+v, %v; want Replayed and the replay mark out of Headers", ev, err)
	}
	bad := consumed(t, e)
	bad.Value = []byte(`{"id":`)
	if _, err := decode(bad); !errors.Is(err, outbox.ErrMalformed) {
		t.Errorf("decode of a non-JSON value: %v, want ErrMalformed", err)
	}
}

// BenchmarkDecode measures message → event parsing, the worker's per-event
// work before the database:
//
//	go test -run '^$' -bench BenchmarkDecode -benchmem ./worker/
func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"contract headers", nil},
		{"with traceparent", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := consumed(b, &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "order-0012345",
				EventType: "order.created", Payload: []byte(`{"id":"order-0012345","amount":1250,"currency":"EUR"}`),
				Headers: tc.headers, CommitTime: time.Now()})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decode(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

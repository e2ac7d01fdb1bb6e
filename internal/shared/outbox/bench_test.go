package outbox

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/testsupport/benchcpu"
)

// BenchmarkMessage measures building the Kafka record of one event, the
// relay's per-event cost after decoding: payload compaction, headers, key.
func BenchmarkMessage(b *testing.B) {
	base := Event{
		ID:            uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21"),
		AggregateType: "orders", AggregateID: "k-417", EventType: "order.created",
		// jsonb's text output, as the relay receives it.
		Payload:    []byte(`{"seq": 4417, "amount": 4417, "customer": "c52", "items": [{"sku": "a-1", "qty": 2}]}`),
		CommitTime: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
	}
	for _, bc := range []struct {
		name    string
		headers map[string]string
	}{
		{"noheaders", nil},
		{"traceparent", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
	} {
		e := base
		e.Headers = bc.headers
		b.Run("Message/"+bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(e.Payload)))
			b.ReportAllocs()
			clock := benchcpu.Start()
			for b.Loop() {
				msg, err := Message(&e, "prod.")
				if err != nil || len(msg.Headers) != 3+len(bc.headers) {
					b.Fatal(err)
				}
			}
			clock.Report(b, 1, "")
		})
		// The relay's path: a Builder per session, the Record inside the
		// relay's own per-event struct.
		b.Run("Builder/"+bc.name, func(b *testing.B) {
			bld := NewBuilder("prod.")
			b.SetBytes(int64(len(e.Payload)))
			b.ReportAllocs()
			clock := benchcpu.Start()
			for b.Loop() {
				r := new(Record)
				if err := bld.Build(r, &e); err != nil || len(r.Msg.Headers) != 3+len(bc.headers) {
					b.Fatal(err)
				}
			}
			clock.Report(b, 1, "")
		})
		// The relay's path with its per-event structs recycled: the
		// Record is reused, its buffer with it.
		b.Run("Reused/"+bc.name, func(b *testing.B) {
			bld := NewBuilder("prod.")
			r := new(Record)
			b.SetBytes(int64(len(e.Payload)))
			b.ReportAllocs()
			clock := benchcpu.Start()
			for b.Loop() {
				r.Reuse()
				if err := bld.Build(r, &e); err != nil || len(r.Msg.Headers) != 3+len(bc.headers) {
					b.Fatal(err)
				}
			}
			clock.Report(b, 1, "")
		})
	}
}

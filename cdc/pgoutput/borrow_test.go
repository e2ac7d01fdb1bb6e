package pgoutput

import (
	"bytes"
	"reflect"
	"testing"
)

// TestBorrowEventsDecodesTheSameEvents checks that a borrowing decoder yields
// the events a copying one does, reusing one Event whose payload aliases the
// message, and that the copying decoder is unaffected.
func TestBorrowEventsDecodesTheSameEvents(t *testing.T) {
	for _, name := range []string{"insert_one", "insert_multi", "big"} {
		t.Run(name, func(t *testing.T) {
			msgs := loadCapture(t, name)
			copying := NewDecoder("public", "outbox")
			borrowing := NewDecoder("public", "outbox")
			borrowing.BorrowEvents()
			var first any
			events := 0
			for i, m := range msgs {
				want, werr := copying.Decode(bytes.Clone(m.data))
				buf := bytes.Clone(m.data)
				got, gerr := borrowing.Decode(buf)
				if (werr != nil) != (gerr != nil) || want.Kind != got.Kind {
					t.Fatalf("message %d: %v %v vs %v %v", i, want.Kind, werr, got.Kind, gerr)
				}
				if got.Kind != KindEvent {
					continue
				}
				events++
				if !reflect.DeepEqual(*want.Event, *got.Event) {
					t.Fatalf("message %d: borrowed %+v, want %+v", i, *got.Event, *want.Event)
				}
				if first == nil {
					first = got.Event
				} else if any(got.Event) != first {
					t.Fatalf("message %d: a new Event, want the borrowed one reused", i)
				}
				if len(got.Event.Payload) > 0 {
					for j := range buf {
						buf[j] = 0 // the caller reuses its buffer
					}
					if bytes.Equal(got.Event.Payload, want.Event.Payload) {
						t.Fatalf("message %d: payload does not alias the message", i)
					}
				}
			}
			if events == 0 {
				t.Fatal("no events in the capture")
			}
		})
	}
}

// BenchmarkDecodeInsertBorrowed is BenchmarkDecodeInsert the way the relay
// decodes: with BorrowEvents.
func BenchmarkDecodeInsertBorrowed(b *testing.B) {
	msgs := loadCapture(b, "insert_one") // Begin, Relation, Insert, Commit
	d := NewDecoder("public", "outbox")
	d.BorrowEvents()
	for _, m := range msgs[:2] {
		if _, err := d.Decode(m.data); err != nil {
			b.Fatal(err)
		}
	}
	noHeaders := insertMsg(testRel, row(map[int]col{5: txt("{}")})...)
	for _, bc := range []struct {
		name string
		rel  []byte // the relation the message needs, when not the capture's
		msg  []byte
	}{
		{"headers", nil, msgs[2].data},
		{"noheaders", relationMsg(testRel, "public", "outbox", outboxCols...), noHeaders},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.rel != nil {
				if _, err := d.Decode(bc.rel); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(bc.msg)))
			b.ReportAllocs()
			for b.Loop() {
				it, err := d.Decode(bc.msg)
				if err != nil || it.Kind != KindEvent {
					b.Fatal(it.Kind, err)
				}
			}
		})
	}
}

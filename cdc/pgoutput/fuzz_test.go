package pgoutput

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// joinMsgs frames messages as the fuzz input: each behind a 2-byte length.
func joinMsgs(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// FuzzDecode feeds a sequence of messages to one decoder. Whatever the
// bytes, Decode must not panic, every error must wrap a sentinel, and an
// event must not alias the message it came from.
func FuzzDecode(f *testing.F) {
	for _, name := range captures {
		var msgs [][]byte
		for _, m := range loadCapture(f, name) {
			if len(m.data) < 1<<16 {
				msgs = append(msgs, m.data)
			}
		}
		f.Add(joinMsgs(msgs...))
	}
	rel := relationMsg(testRel, "public", "outbox", outboxCols...)
	begin := beginMsg(0x1000, 1, 7)
	f.Add(joinMsgs(rel, begin, insertMsg(testRel, row(nil)...), logicalMsg(true, 9, HeartbeatPrefix, "x"),
		truncateMsg(testRel), commitMsg(0x1000, 0x1030, 1)))
	f.Add(joinMsgs(rel, begin, insertMsg(testRel, row(map[int]col{4: toast, 5: null})...)))
	for _, set := range hostileRows { // hostile_fuzz_test.go
		f.Add(joinMsgs(rel, begin, insertMsg(testRel, row(set)...), commitMsg(0x1000, 0x1030, 1)))
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder("public", "outbox")
		for len(in) >= 2 {
			n := int(binary.BigEndian.Uint16(in))
			in = in[2:]
			n = min(n, len(in))
			msg := in[:n]
			in = in[n:]
			it, err := d.Decode(msg)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadRow) &&
					!errors.Is(err, ErrUnknownRelation) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				if it.Kind != KindSkip || it.Event != nil {
					t.Fatalf("error with an item: %+v", it)
				}
				continue
			}
			if (it.Kind == KindEvent) != (it.Event != nil) {
				t.Fatalf("kind %v with event %v", it.Kind, it.Event)
			}
			if it.Kind == KindEvent {
				payload, id := bytes.Clone(it.Event.Payload), it.Event.AggregateID
				for i := range msg {
					msg[i] ^= 0xff
				}
				if !bytes.Equal(payload, it.Event.Payload) || id != it.Event.AggregateID {
					t.Fatal("event aliases the message buffer")
				}
			}
		}
	})
}

// BenchmarkDecodeInsert measures the per-event hot path: one captured
// INSERT into the outbox.
func BenchmarkDecodeInsert(b *testing.B) {
	msgs := loadCapture(b, "insert_one") // Begin, Relation, Insert, Commit
	d := NewDecoder("public", "outbox")
	for _, m := range msgs[:2] {
		if _, err := d.Decode(m.data); err != nil {
			b.Fatal(err)
		}
	}
	// The captured row has string headers; most rows have none.
	for _, bc := range []struct {
		name string
		msg  []byte
	}{
		{"headers", msgs[2].data},
		{"noheaders", insertMsg(testRel, row(map[int]col{5: txt("{}")})...)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d.Reset()
			for _, m := range msgs[:2] {
				if _, err := d.Decode(m.data); err != nil {
					b.Fatal(err)
				}
			}
			if bc.name == "noheaders" {
				if _, err := d.Decode(relationMsg(testRel, "public", "outbox", outboxCols...)); err != nil {
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

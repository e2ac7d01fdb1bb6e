package pgoutput

import (
	"bytes"
	"errors"
	"maps"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// decodeAll decodes a capture with d and returns its events, copied.
func decodeAll(t *testing.T, d *Decoder, msgs []captured) []outbox.Event {
	t.Helper()
	var out []outbox.Event
	for i, m := range msgs {
		it, err := d.Decode(m.data)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if it.Kind == KindEvent {
			out = append(out, *it.Event)
		}
	}
	return out
}

// TestBinaryDecodesAsText decodes the same transaction captured from a real
// server twice, in pgoutput's text format and with binary = true, and
// requires identical events: the outbox table (uuid, text, jsonb) and a
// Debezium-shaped one (uuid key, varchar and char columns, a bytea payload,
// a name column carried as a header, a NULL payload).
func TestBinaryDecodesAsText(t *testing.T) {
	text, bin := loadCapture(t, "pair_text"), loadCapture(t, "pair_binary")
	if bytes.Equal(text[2].data, bin[2].data) {
		t.Fatal("the captures are the same: pair_binary.hex was not captured with binary = true")
	}
	debezium := outbox.Mapping{Table: "alt.binout", EventID: "id", Topic: "aggregatetype", Key: "aggregateid",
		EventType: "type", Payload: "payload", ExtraHeaders: []string{"extra_name"}, NullPayload: outbox.NullPayloadTombstone}
	for _, tc := range []struct {
		name   string
		m      outbox.Mapping
		events int
	}{
		{"outbox", outbox.DefaultMapping(), 2},
		{"debezium-shaped", debezium, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newDec := func() *Decoder {
				d, err := NewMappedDecoder(&tc.m)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			want, got := decodeAll(t, newDec(), text), decodeAll(t, newDec(), bin)
			if len(want) != tc.events || len(got) != len(want) {
				t.Fatalf("%d events in text, %d in binary; want %d", len(want), len(got), tc.events)
			}
			for i := range want {
				w, g := want[i], got[i]
				if w.ID != g.ID || w.AggregateType != g.AggregateType || w.AggregateID != g.AggregateID ||
					w.EventType != g.EventType || !bytes.Equal(w.Payload, g.Payload) || w.PayloadKind != g.PayloadKind ||
					w.NoPayload != g.NoPayload || w.JSONChecked != g.JSONChecked || !maps.Equal(w.Headers, g.Headers) {
					t.Errorf("event %d:\n text   %+v\n binary %+v", i, w, g)
				}
			}
		})
	}
}

// TestBinaryValues: each type read in binary, and the ones that are not.
func TestBinaryValues(t *testing.T) {
	id := []byte{0x6f, 0x1c, 0x2a, 0x4e, 0x8d, 0x7b, 0x4c, 0x3a, 0x9e, 0x5f, 0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f}
	for _, tc := range []struct {
		name string
		oid  uint32
		f    field
		data []byte
		kind byte
		want string
		err  error
	}{
		{"text", oidText, fieldAggregateID, []byte("o-1"), tupleText, "o-1", nil},
		{"varchar", oidVarchar, fieldAggregateType, []byte("orders"), tupleText, "orders", nil},
		{"char keeps its padding", oidBpchar, fieldEventType, []byte("paid  "), tupleText, "paid  ", nil},
		{"json", oidJSON, fieldPayload, []byte(`{"a":1}`), tupleText, `{"a":1}`, nil},
		{"jsonb drops its version byte", oidJSONB, fieldPayload, append([]byte{1}, `{"a": 1}`...), tupleText, `{"a": 1}`, nil},
		{"jsonb of an unknown version", oidJSONB, fieldPayload, append([]byte{2}, `{}`...), 0, "", ErrMalformed},
		{"uuid event id stays bytes", oidUUID, fieldEventID, id, kindUUIDBytes, string(id), nil},
		{"uuid key becomes its text", oidUUID, fieldAggregateID, id, tupleText, "6f1c2a4e-8d7b-4c3a-9e5f-0a1b2c3d4e5f", nil},
		{"short uuid", oidUUID, fieldEventID, id[:15], 0, "", ErrMalformed},
		{"bytea payload stays bytes", oidBytea, fieldPayload, []byte{0, 0xff}, kindRawBytes, "\x00\xff", nil},
		{"bytea key has no binary decoding", oidBytea, fieldAggregateID, []byte{1}, 0, "", ErrBinaryType},
		{"int8 has no binary decoding", 20, fieldAggregateID, make([]byte, 8), 0, "", ErrBinaryType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf []byte
			v, err := fromBinary(value{kind: tupleBinary, data: tc.data}, tc.oid, tc.f, &buf)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && (v.kind != tc.kind || string(v.data) != tc.want) {
				t.Fatalf("got kind %q %q, want %q %q", v.kind, v.data, tc.kind, tc.want)
			}
		})
	}
	if !errors.Is(ErrBinaryType, ErrUnsupported) {
		t.Fatal("ErrBinaryType must wrap ErrUnsupported")
	}
}

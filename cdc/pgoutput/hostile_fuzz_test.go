package pgoutput

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// hostileRows are outbox rows as PostgreSQL sends the hostile rows of
// cdc/hostile_test.go (jsonb in its output form), plus rows only a changed
// schema produces.
// A payload in binary format (row 19) is read as its column type's text:
// here a text column's.
var hostileRows = []map[int]col{
	{4: txt(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))},
	{5: txt(`{"h": "v", "deep": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`)},
	{5: txt(`{"": "empty name", "a": ["x"], "b": true, "f": 1.5, "n": 1, "o": {"k": "v"}, "s": "str", "z": null}`)},
	{5: txt(`[1, "x"]`)}, {5: txt(`"x"`)}, {5: txt(`null`)}, {5: txt(`{"h\u0002": "a\u0001\u001fb\n"}`)},
	{2: txt("")}, {2: txt(strings.Repeat("k", 4000))}, {2: txt("k\x01\x1f\x7f\t é\u2028😀")},
	{1: txt("bad topic!")}, {1: txt("")}, {1: txt("__consumer_offsets")}, {3: txt("")},
	{4: txt(`{"e": 1000, "n": 1.50, "s": "a\u0001b\u001f\n\t\"\\ ` + "\x7f é \u2028 😀" + `", "big": 123456789012345678901234567890}`)},
	{0: txt("not-a-uuid")}, {0: txt("")}, {4: null}, {4: toast}, {4: col{'b', "\x01"}}, {5: null}, {5: txt("not json")},
	{2: txt("\xff\xfe invalid UTF-8")}, {4: txt(`"\ud800"`)},
}

// FuzzDecodeRow decodes one outbox INSERT whose column values are fuzzed
// while the framing stays valid. The decoder must either give back an event
// whose key, payload and types are the column bytes unchanged, or refuse the
// row with a *RowError (which the relay records in outbox_rejected); never
// panic and never fail the stream with another error.
func FuzzDecodeRow(f *testing.F) {
	add := func(r []col) {
		f.Add(r[0].data, r[1].data, r[2].data, r[3].data, r[4].data, r[5].data, r[4].kind, r[5].kind)
	}
	add(row(nil))
	for _, set := range hostileRows {
		add(row(set))
	}
	f.Fuzz(func(t *testing.T, id, aggType, aggID, evType, payload, headers string, payloadKind, headersKind byte) {
		d := NewDecoder("public", "outbox")
		for _, m := range [][]byte{relationMsg(testRel, "public", "outbox", outboxCols...), beginMsg(0x10, 1, 7)} {
			if _, err := d.Decode(m); err != nil {
				t.Fatal(err)
			}
		}
		kinds := []byte{'t', 'n', 'u', 'b'}
		pk, hk := kinds[int(payloadKind)%len(kinds)], kinds[int(headersKind)%len(kinds)]
		it, err := d.Decode(insertMsg(testRel, row(map[int]col{0: txt(id), 1: txt(aggType), 2: txt(aggID), 3: txt(evType),
			4: {pk, payload}, 5: {hk, headers}})...))
		if err != nil {
			var re *RowError
			if !errors.As(err, &re) || !errors.Is(err, ErrBadRow) {
				t.Fatalf("a well-framed row failed with %v, want a *RowError", err)
			}
			if re.EventID != uuid.Nil && re.EventID != uuid.MustParse(id) {
				t.Fatalf("RowError names event %s, row has %q", re.EventID, id)
			}
			return
		}
		e := it.Event
		if it.Kind != KindEvent || e == nil {
			t.Fatalf("insert decoded as %v", it.Kind)
		}
		if e.AggregateType != aggType || e.AggregateID != aggID || e.EventType != evType || string(e.Payload) != payload {
			t.Fatalf("event %+v changed the row's bytes", e)
		}
		if want, err := uuid.Parse(id); err != nil || e.ID != want {
			t.Fatalf("event id %s from %q", e.ID, id)
		}
		if pk != 't' && pk != 'b' { // a text column's binary value is its text
			t.Fatalf("payload of kind %q accepted", pk)
		}
		// What the relay does next must not panic either.
		_, _ = outbox.Message(e, "")
	})
}

// TestHostileRowsDecode pins the decoder's answer for each hostile row: a
// row-level refusal (the relay sets the row aside) or an event.
func TestHostileRowsDecode(t *testing.T) {
	refused := map[int]string{ // index in hostileRows -> refused column
		1: "headers", 21: "headers", 15: "event_id", 16: "event_id", 17: "payload", 18: "payload",
	}
	for i, set := range hostileRows {
		r := row(set)
		d := NewDecoder("public", "outbox")
		for _, m := range [][]byte{relationMsg(testRel, "public", "outbox", outboxCols...), beginMsg(0x10, 1, 7)} {
			if _, err := d.Decode(m); err != nil {
				t.Fatal(err)
			}
		}
		it, err := d.Decode(insertMsg(testRel, r...))
		name := truncateCols(r)
		var re *RowError
		switch column, bad := refused[i]; {
		case bad && (!errors.As(err, &re) || re.Column != column):
			t.Errorf("row %d %s: err %v, want a refusal of column %s", i, name, err, column)
		case bad && re.AggregateType != r[1].data:
			t.Errorf("row %d: RowError names aggregate type %q, want %q", i, re.AggregateType, r[1].data)
		case !bad && (err != nil || it.Kind != KindEvent):
			t.Errorf("row %d %s: kind %v, err %v, want an event", i, name, it.Kind, err)
		}
	}
}

func truncateCols(r []col) string {
	var b strings.Builder
	for _, c := range r[:6] {
		b.WriteString(string(c.kind) + ":" + string(truncate([]byte(c.data))) + " ")
	}
	return b.String()
}

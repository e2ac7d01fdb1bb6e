package pgoutput

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// wantEvent is what the SQL of testdata/capture.sh inserted.
type wantEvent struct {
	id, aggType, aggID, evType, payload string
	headers                             map[string]string
}

// TestDecodeCaptured decodes real pgoutput messages and checks every item
// against the SQL that produced them and the LSN/xid PostgreSQL reported.
func TestDecodeCaptured(t *testing.T) {
	tests := []struct {
		file          string
		schema, table string
		kinds         []Kind
		events        []wantEvent
		ops           []string
	}{
		{
			file: "insert_one", schema: "public", table: "outbox",
			kinds: []Kind{KindBegin, KindSkip, KindEvent, KindCommit},
			events: []wantEvent{{"6f1c2a4e-8d7b-4c3a-9e5f-0a1b2c3d4e5f", "orders", "o-1", "order.created",
				// jsonb's own text: keys reordered, non-string header "n" left out.
				`{"id": "o-1", "tags": ["a", "b"], "amount": 1250}`, map[string]string{"trace": "t-1"}}},
		},
		{
			// Another table's row in the same transaction is skipped.
			file: "insert_multi", schema: "public", table: "outbox",
			kinds: []Kind{KindBegin, KindSkip, KindSkip, KindSkip, KindEvent, KindEvent, KindEvent, KindCommit},
			events: []wantEvent{
				{"00000000-0000-4000-8000-000000000001", "orders", "o-2", "order.created", `{"id": "o-2"}`, nil},
				{"00000000-0000-4000-8000-000000000002", "orders", "o-2", "order.paid", `{}`, nil},
				{"00000000-0000-4000-8000-000000000003", "customers", "c-9", "customer.seen", `[1, 2, 3]`, nil},
			},
		},
		{
			// Columns in another order, extra columns, a NULL extra column.
			file: "alt_outbox", schema: "alt", table: "outbox",
			kinds: []Kind{KindBegin, KindSkip, KindEvent, KindCommit},
			events: []wantEvent{{"11111111-2222-4333-8444-555555555555", "orders", "o-3", "order.created",
				`{"x": null}`, map[string]string{"k": "v"}}},
		},
		{
			// The same table under another schema is not the outbox.
			file: "alt_outbox", schema: "public", table: "outbox",
			kinds: []Kind{KindBegin, KindSkip, KindSkip, KindCommit},
		},
		{
			file: "heartbeat", schema: "public", table: "outbox",
			kinds: []Kind{KindBegin, KindHeartbeat, KindCommit, KindBegin, KindSkip, KindCommit},
		},
		{
			// The first message is the non-transactional heartbeat emitted by
			// the heartbeat capture; the server sent it with this batch.
			file: "update_delete_truncate", schema: "public", table: "outbox",
			kinds: []Kind{KindHeartbeat,
				KindBegin, KindSkip, KindIgnored, KindCommit,
				KindBegin, KindIgnored, KindCommit,
				KindBegin, KindSkip, KindSkip, KindIgnored, KindCommit,
				KindBegin, KindSkip, KindSkip, KindCommit},
			ops: []string{"update", "delete", "truncate"},
		},
		{
			// A Type message for an enum column, another table's row.
			file: "typed", schema: "public", table: "outbox",
			kinds: []Kind{KindBegin, KindSkip, KindSkip, KindSkip, KindCommit},
		},
		{
			file: "origin", schema: "public", table: "outbox",
			kinds:  []Kind{KindBegin, KindSkip, KindSkip, KindEvent, KindCommit},
			events: []wantEvent{{"44444444-4444-4444-8444-444444444444", "orders", "o-6", "order.created", `{}`, nil}},
		},
		{
			// A payload above the TOAST threshold arrives whole in an INSERT.
			file: "big", schema: "public", table: "outbox",
			kinds: []Kind{KindBegin, KindSkip, KindEvent, KindCommit},
			events: []wantEvent{{"55555555-5555-4555-8555-555555555555", "orders", "o-7", "order.created",
				`{"blob": "` + strings.Repeat("0123456789", 1000) + `"}`, nil}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.schema, func(t *testing.T) {
			msgs := loadCapture(t, tc.file)
			if len(msgs) != len(tc.kinds) {
				t.Fatalf("%d messages, test expects %d", len(msgs), len(tc.kinds))
			}
			d := NewDecoder(tc.schema, tc.table)
			var begin Item
			var events []wantEvent
			var ops []string
			for i, m := range msgs {
				it, err := d.Decode(m.data)
				if err != nil {
					t.Fatalf("message %d (%q): %v", i, m.data[0], err)
				}
				if it.Kind != tc.kinds[i] {
					t.Fatalf("message %d (%q): kind %v, want %v", i, m.data[0], it.Kind, tc.kinds[i])
				}
				checkTxnFields(t, i, it, m, &begin)
				switch it.Kind {
				case KindEvent:
					if !it.Event.CommitTime.Equal(begin.CommitTime) {
						t.Errorf("event commit time %v, begin's %v", it.Event.CommitTime, begin.CommitTime)
					}
					events = append(events, asWant(it))
				case KindIgnored:
					ops = append(ops, it.Op)
				case KindHeartbeat:
					if it.Prefix != HeartbeatPrefix || it.MessageLSN != m.lsn {
						t.Errorf("heartbeat prefix %q lsn %s, want %q %s", it.Prefix, it.MessageLSN, HeartbeatPrefix, m.lsn)
					}
					if it.Transactional != (m.xid != 0) {
						t.Errorf("heartbeat transactional = %v for xid %d", it.Transactional, m.xid)
					}
				}
			}
			if len(events) != len(tc.events) {
				t.Fatalf("%d events, want %d", len(events), len(tc.events))
			}
			for i := range events {
				if !equalWant(events[i], tc.events[i]) {
					t.Errorf("event %d:\n got %+v\nwant %+v", i, events[i], tc.events[i])
				}
			}
			if strings.Join(ops, ",") != strings.Join(tc.ops, ",") {
				t.Errorf("ignored ops %v, want %v", ops, tc.ops)
			}
		})
	}
}

// checkTxnFields compares Begin/Commit fields with what PostgreSQL reported:
// the SQL interface gives a Commit row the transaction's end LSN.
func checkTxnFields(t *testing.T, i int, it Item, m captured, begin *Item) {
	t.Helper()
	switch it.Kind {
	case KindBegin:
		*begin = it
		if it.Xid != m.xid || it.FinalLSN == 0 || it.CommitTime.IsZero() {
			t.Errorf("message %d: begin %+v, xid want %d", i, it, m.xid)
		}
	case KindCommit:
		if it.EndLSN != m.lsn {
			t.Errorf("message %d: end LSN %s, PostgreSQL says %s", i, it.EndLSN, m.lsn)
		}
		if it.CommitLSN != begin.FinalLSN || it.CommitLSN >= it.EndLSN {
			t.Errorf("message %d: commit LSN %s, begin's final %s, end %s", i, it.CommitLSN, begin.FinalLSN, it.EndLSN)
		}
		if it.Xid != begin.Xid || !it.CommitTime.Equal(begin.CommitTime) {
			t.Errorf("message %d: commit xid %d time %v, begin's %d %v", i, it.Xid, it.CommitTime, begin.Xid, begin.CommitTime)
		}
	case KindEvent, KindIgnored:
		if it.Xid != m.xid {
			t.Errorf("message %d: xid %d, want %d", i, it.Xid, m.xid)
		}
	}
}

func asWant(it Item) wantEvent {
	e := it.Event
	return wantEvent{e.ID.String(), e.AggregateType, e.AggregateID, e.EventType, string(e.Payload), e.Headers}
}

func equalWant(a, b wantEvent) bool {
	return a.id == b.id && a.aggType == b.aggType && a.aggID == b.aggID && a.evType == b.evType &&
		a.payload == b.payload && maps.Equal(a.headers, b.headers)
}

// TestDecodeCapturedBadRows: rows of a loosely typed table (alt.weird) that
// cannot be events; errors leave the decoder usable.
func TestDecodeCapturedBadRows(t *testing.T) {
	msgs := loadCapture(t, "weird")
	d := NewDecoder("alt", "weird")
	type want struct {
		kind    Kind
		column  string // non-empty: ErrBadRow naming it
		eventID string
	}
	wants := []want{
		{kind: KindBegin}, {kind: KindSkip}, {column: "event_id"}, {kind: KindCommit},
		{kind: KindBegin}, {column: "aggregate_id", eventID: "22222222-2222-4222-8222-222222222222"}, {kind: KindCommit},
		// headers '["not", "an object"]': no string entries, no headers.
		{kind: KindBegin}, {kind: KindEvent}, {kind: KindCommit},
	}
	if len(msgs) != len(wants) {
		t.Fatalf("%d messages, want %d", len(msgs), len(wants))
	}
	for i, m := range msgs {
		it, err := d.Decode(m.data)
		w := wants[i]
		if w.column != "" {
			var re *RowError
			if !errors.Is(err, ErrBadRow) || !errors.As(err, &re) || re.Column != w.column {
				t.Fatalf("message %d: err %v, want ErrBadRow on %s", i, err, w.column)
			}
			if re.EventID.String() != w.eventID && !(w.eventID == "" && re.EventID == uuid.Nil) {
				t.Errorf("message %d: RowError.EventID %s, want %q", i, re.EventID, w.eventID)
			}
			if !strings.Contains(err.Error(), w.column) || re.Relation != "alt.weird" {
				t.Errorf("message %d: error %q does not name column %s of alt.weird", i, err, w.column)
			}
			continue
		}
		if err != nil || it.Kind != w.kind {
			t.Fatalf("message %d: %v %v, want %v", i, it.Kind, err, w.kind)
		}
		if it.Kind == KindEvent && it.Event.Headers != nil {
			t.Errorf("headers %v from a JSON array, want none", it.Event.Headers)
		}
	}
}

func TestDecodeStreamedIsUnsupported(t *testing.T) {
	msgs := loadCapture(t, "streamed")
	for _, m := range msgs { // Stream Start, Relation and Insert with xid, Stream Stop, Stream Commit
		if m.data[0] != 'S' && m.data[0] != 'E' && m.data[0] != 'c' {
			continue
		}
		_, err := NewDecoder("public", "outbox").Decode(m.data)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: err %v, want ErrUnsupported", m.data[0], err)
		}
	}
}

// TestResetForgetsRelations: after a reconnect an INSERT whose Relation was
// sent on the old connection is an error, not a guess (docs/design.md#relation-cache).
func TestResetForgetsRelations(t *testing.T) {
	msgs := loadCapture(t, "insert_one") // Begin, Relation, Insert, Commit
	d := NewDecoder("public", "outbox")
	for _, m := range msgs[:2] {
		if _, err := d.Decode(m.data); err != nil {
			t.Fatal(err)
		}
	}
	d.Reset()
	if it, err := d.Decode(msgs[0].data); err != nil || it.Kind != KindBegin {
		t.Fatalf("begin after reset: %v %v (Reset must also forget the open transaction)", it.Kind, err)
	}
	if _, err := d.Decode(msgs[2].data); !errors.Is(err, ErrUnknownRelation) {
		t.Fatalf("insert after reset: %v, want ErrUnknownRelation", err)
	}
	// The Relation sent again on the new connection makes it decodable.
	if _, err := d.Decode(msgs[1].data); err != nil {
		t.Fatal(err)
	}
	if it, err := d.Decode(msgs[2].data); err != nil || it.Kind != KindEvent {
		t.Fatalf("insert after relation: %v %v", it.Kind, err)
	}
}

// TestDecodedEventOwnsItsBytes: the relay's receive buffer is reused, so an
// event must not alias it.
func TestDecodedEventOwnsItsBytes(t *testing.T) {
	msgs := loadCapture(t, "insert_one")
	d := NewDecoder("public", "outbox")
	var ev Item
	for _, m := range msgs[:3] {
		buf := bytes.Clone(m.data)
		it, err := d.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if it.Kind == KindEvent {
			ev = it
		}
		clear(buf)
	}
	got := asWant(ev)
	if got.aggID != "o-1" || got.payload != `{"id": "o-1", "tags": ["a", "b"], "amount": 1250}` ||
		got.aggType != "orders" || got.evType != "order.created" {
		t.Fatalf("event changed with the buffer: %+v", got)
	}
}

// TestDecodeHandBuilt covers what a server will not send on demand.
func TestDecodeHandBuilt(t *testing.T) {
	rel := relationMsg(testRel, "public", "outbox", outboxCols...)
	other := relationMsg(otherRel, "public", "orders", "id", "status")
	begin := beginMsg(0x1000, 1, 7)
	open := [][]byte{rel, other, begin}
	tests := []struct {
		name    string
		setup   [][]byte
		msg     []byte
		kind    Kind
		op      string
		err     error
		column  string // for ErrBadRow
		inError string // substring of the error
	}{
		{name: "valid insert", setup: open, msg: insertMsg(testRel, row(nil)...), kind: KindEvent},
		{name: "headers NULL", setup: open, msg: insertMsg(testRel, row(map[int]col{5: null})...), kind: KindEvent},
		{name: "headers column absent", msg: insertMsg(testRel, txt(testUUID), txt("a"), txt("b"), txt("c"), txt("{}")),
			setup: [][]byte{relationMsg(testRel, "public", "outbox", outboxCols[:5]...), begin}, kind: KindEvent},
		{name: "uppercase UUID", setup: open, kind: KindEvent,
			msg: insertMsg(testRel, row(map[int]col{0: txt(strings.ToUpper(testUUID))})...)},
		{name: "bad UUID", setup: open, msg: insertMsg(testRel, row(map[int]col{0: txt("6f1c2a4e")})...), err: ErrBadRow, column: "event_id"},
		{name: "NULL event type", setup: open, msg: insertMsg(testRel, row(map[int]col{3: null})...), err: ErrBadRow, column: "event_type"},
		{name: "NULL aggregate type", setup: open, msg: insertMsg(testRel, row(map[int]col{1: null})...), err: ErrBadRow, column: "aggregate_type"},
		{name: "NULL aggregate id", setup: open, msg: insertMsg(testRel, row(map[int]col{2: null})...), err: ErrBadRow, column: "aggregate_id"},
		{name: "NULL payload", setup: open, msg: insertMsg(testRel, row(map[int]col{4: null})...), err: ErrBadRow, column: "payload"},
		{name: "unchanged toast payload", setup: open, msg: insertMsg(testRel, row(map[int]col{4: toast})...), err: ErrBadRow, column: "payload"},
		{name: "unchanged toast headers", setup: open, msg: insertMsg(testRel, row(map[int]col{5: toast})...), err: ErrBadRow, column: "headers"},
		// A text column in binary format is its text (the binary option).
		{name: "binary aggregate id", setup: open, msg: insertMsg(testRel, row(map[int]col{2: {'b', "x"}})...), kind: KindEvent},
		{name: "headers not JSON", setup: open, msg: insertMsg(testRel, row(map[int]col{5: txt("{oops")})...), err: ErrBadRow, column: "headers"},
		{name: "headers garbage", setup: open, msg: insertMsg(testRel, row(map[int]col{5: txt("oops")})...), err: ErrBadRow, column: "headers"},
		{name: "payload column missing", msg: insertMsg(testRel, txt(testUUID), txt("a"), txt("b"), txt("c")),
			setup: [][]byte{relationMsg(testRel, "public", "outbox", outboxCols[:4]...), begin}, err: ErrBadRow, column: "payload"},
		{name: "event_id column missing", msg: insertMsg(testRel, txt("a"), txt("b"), txt("c"), txt("{}")),
			setup: [][]byte{relationMsg(testRel, "public", "outbox", outboxCols[1:5]...), begin}, err: ErrBadRow, column: "event_id"},
		{name: "row shorter than relation", setup: open, msg: insertMsg(testRel, row(nil)[:6]...), err: ErrBadRow, inError: "6 columns"},
		{name: "unknown relation", setup: open, msg: insertMsg(99, row(nil)...), err: ErrUnknownRelation},
		{name: "other table insert", setup: open, msg: insertMsg(otherRel, txt("o-1"), txt("created")), kind: KindSkip},
		{name: "other table garbage row is not read", setup: open, msg: insertMsg(otherRel, col{'x', ""}), kind: KindSkip},
		{name: "update outbox", setup: open, msg: updateMsg(testRel, row(nil)...), kind: KindIgnored, op: "update"},
		{name: "delete outbox", setup: open, msg: deleteMsg(testRel, row(nil)...), kind: KindIgnored, op: "delete"},
		{name: "update other", setup: open, msg: updateMsg(otherRel, txt("o"), txt("s")), kind: KindSkip},
		{name: "update unknown", setup: open, msg: updateMsg(98, txt("o")), err: ErrUnknownRelation},
		{name: "truncate both", setup: open, msg: truncateMsg(otherRel, testRel), kind: KindIgnored, op: "truncate"},
		{name: "truncate other", setup: open, msg: truncateMsg(otherRel), kind: KindSkip},
		{name: "truncate unknown", setup: open, msg: truncateMsg(otherRel, 97), err: ErrUnknownRelation},
		{name: "truncate count lies", setup: open, msg: truncateMsg(otherRel)[:9], err: ErrMalformed},
		{name: "heartbeat", setup: open, msg: logicalMsg(true, 0x0f00, HeartbeatPrefix, "x"), kind: KindHeartbeat},
		{name: "other prefix", setup: open, msg: logicalMsg(true, 0x0f00, "eventforge.heartbeatx", "x"), kind: KindSkip},
		{name: "transactional heartbeat outside txn", msg: logicalMsg(true, 0x0f00, HeartbeatPrefix, ""), err: ErrMalformed},
		{name: "insert outside txn", setup: [][]byte{rel}, msg: insertMsg(testRel, row(nil)...), err: ErrMalformed},
		{name: "begin inside txn", setup: open, msg: beginMsg(0x2000, 2, 8), err: ErrMalformed},
		{name: "commit without begin", msg: commitMsg(0x1000, 0x1030, 1), err: ErrMalformed},
		{name: "commit LSN differs from begin", setup: open, msg: commitMsg(0x1008, 0x1030, 1), err: ErrMalformed},
		{name: "end before commit", setup: open, msg: commitMsg(0x1000, 0x0fff, 1), err: ErrMalformed},
		{name: "commit", setup: open, msg: commitMsg(0x1000, 0x1030, 1), kind: KindCommit},
		{name: "truncated begin", msg: beginMsg(1, 1, 1)[:12], err: ErrMalformed},
		{name: "begin trailing bytes", msg: append(beginMsg(1, 1, 1), 0), err: ErrMalformed},
		{name: "truncated insert", setup: open, msg: insertMsg(testRel, row(nil)...)[:40], err: ErrMalformed},
		{name: "insert trailing bytes", setup: open, msg: append(insertMsg(testRel, row(nil)...), 1), err: ErrMalformed},
		{name: "insert bad tuple tag", setup: open, msg: tuple(wbuf{'I'}.u32(testRel).u8('K'), row(nil)), err: ErrMalformed},
		{name: "insert bad column kind", setup: open, msg: insertMsg(testRel, row(map[int]col{6: {'x', ""}})...), err: ErrMalformed},
		{name: "truncated relation", msg: rel[:len(rel)-3], err: ErrMalformed},
		{name: "empty", msg: nil, err: ErrMalformed},
		{name: "stream start", msg: wbuf{'S'}.u32(1).u8(1), err: ErrUnsupported},
		{name: "begin prepare", msg: []byte{'b'}, err: ErrUnsupported},
		{name: "unknown type", msg: []byte{'Z', 0}, err: ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder("public", "outbox")
			for _, m := range tc.setup {
				if _, err := d.Decode(m); err != nil {
					t.Fatalf("setup %q: %v", m[0], err)
				}
			}
			it, err := d.Decode(tc.msg)
			if tc.err == nil {
				if err != nil || it.Kind != tc.kind || it.Op != tc.op {
					t.Fatalf("got %v %q %v, want %v %q", it.Kind, it.Op, err, tc.kind, tc.op)
				}
				if it.Kind == KindEvent && it.Event == nil {
					t.Fatal("KindEvent without Event")
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if tc.column != "" {
				var re *RowError
				if !errors.As(err, &re) || re.Column != tc.column {
					t.Fatalf("err %v, want RowError on column %s", err, tc.column)
				}
			}
			if !strings.Contains(err.Error(), tc.inError) {
				t.Fatalf("err %q does not say %q", err, tc.inError)
			}
		})
	}
}

// TestHeadersFromHandBuiltRow checks which header values become headers.
func TestHeadersFromHandBuiltRow(t *testing.T) {
	d := NewDecoder("public", "outbox")
	for _, m := range [][]byte{relationMsg(testRel, "public", "outbox", outboxCols...), beginMsg(1, 1, 1)} {
		if _, err := d.Decode(m); err != nil {
			t.Fatal(err)
		}
	}
	raw := ` {"s": "x", "n": 1, "b": true, "o": {"k": "v"}, "z": null, "e": ""} `
	it, err := d.Decode(insertMsg(testRel, row(map[int]col{5: txt(raw)})...))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s": "x", "e": ""}
	if !maps.Equal(it.Event.Headers, want) {
		t.Fatalf("headers %v, want %v", it.Event.Headers, want)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindSkip: "skip", KindEvent: "event", KindIgnored: "ignored", Kind(42): "Kind(42)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
}

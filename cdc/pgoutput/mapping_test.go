package pgoutput

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// typedRelationMsg is relationMsg with a type OID per column.
func typedRelationMsg(id uint32, ns, name string, cols []string, oids []uint32) []byte {
	b := wbuf{'R'}.u32(id).str(ns).str(name).u8('d').u16(uint16(len(cols)))
	for i, c := range cols {
		b = b.u8(0).str(c).u32(oids[i]).u32(0xffffffff)
	}
	return b
}

// debeziumCols is Debezium's default outbox table plus a tenant column,
// in an order unlike the contract's.
var (
	debeziumCols = []string{"payload", "type", "aggregateid", "tenant", "id", "aggregatetype"}
	debeziumOIDs = []uint32{oidBytea, oidVarchar, oidVarchar, oidText, 2950, oidVarchar}
)

func debeziumMapping(t testing.TB) outbox.Mapping {
	t.Helper()
	m, err := outbox.Preset(outbox.PresetDebezium)
	if err != nil {
		t.Fatal(err)
	}
	m.Table = "inventory.outbox"
	m.ExtraHeaders = []string{"tenant:x-tenant"}
	return m
}

func decodeOne(t *testing.T, d *Decoder, rel []byte, ins []byte) (*outbox.Event, error) {
	t.Helper()
	for _, msg := range [][]byte{rel, beginMsg(0x1000, 1, 7)} {
		if _, err := d.Decode(msg); err != nil {
			t.Fatal(err)
		}
	}
	it, err := d.Decode(ins)
	return it.Event, err
}

func TestMappedDecoderReadsColumnsByName(t *testing.T) {
	m := debeziumMapping(t)
	rel := typedRelationMsg(testRel, "inventory", "outbox", debeziumCols, debeziumOIDs)
	cases := []struct {
		name     string
		payload  col
		want     []byte
		wantKind outbox.PayloadKind
		checked  bool // the server validated the JSON
		noValue  bool
		oid      uint32
	}{
		{"bytea not UTF-8", txt(`\xff00fe`), []byte{0xff, 0x00, 0xfe}, outbox.PayloadBinary, false, false, oidBytea},
		{"bytea empty", txt(`\x`), []byte{}, outbox.PayloadBinary, false, false, oidBytea},
		{"bytea escape format", txt(`\377\000\376a\\b`), []byte{0xff, 0x00, 0xfe, 'a', '\\', 'b'}, outbox.PayloadBinary, false, false, oidBytea},
		{"text", txt("plain words"), []byte("plain words"), outbox.PayloadText, false, false, oidText},
		{"jsonb", txt(`{"a": 1}`), []byte(`{"a": 1}`), outbox.PayloadJSON, true, false, oidJSONB},
		{"json", txt(`[1,  2]`), []byte(`[1,  2]`), outbox.PayloadJSON, true, false, oidJSON},
		{"domain: JSON not checked", txt(`[1,  2]`), []byte(`[1,  2]`), outbox.PayloadJSON, false, false, 16400},
		{"null tombstone", null, nil, outbox.PayloadBinary, false, true, oidBytea},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oids := append([]uint32(nil), debeziumOIDs...)
			oids[0] = tc.oid
			rel := typedRelationMsg(testRel, "inventory", "outbox", debeziumCols, oids)
			for _, borrow := range []bool{false, true} {
				d, err := NewMappedDecoder(&m)
				if err != nil {
					t.Fatal(err)
				}
				if borrow {
					d.BorrowEvents()
				}
				e, err := decodeOne(t, d, rel, insertMsg(testRel, tc.payload, txt("OrderCreated"), txt("o-1"), txt("acme"), txt(testUUID), txt("order")))
				if err != nil {
					t.Fatal(err)
				}
				if e.ID.String() != testUUID || e.AggregateType != "order" || e.AggregateID != "o-1" || e.EventType != "OrderCreated" {
					t.Fatalf("event %+v", e)
				}
				if !bytes.Equal(e.Payload, tc.want) || e.PayloadKind != tc.wantKind || e.NoPayload != tc.noValue {
					t.Fatalf("payload %q kind %d noPayload %v, want %q kind %d %v", e.Payload, e.PayloadKind, e.NoPayload, tc.want, tc.wantKind, tc.noValue)
				}
				if e.JSONChecked != tc.checked {
					t.Fatalf("JSONChecked = %v, want %v", e.JSONChecked, tc.checked)
				}
				if e.Headers["x-tenant"] != "acme" || len(e.Headers) != 1 {
					t.Fatalf("headers %v", e.Headers)
				}
			}
		})
	}
	_ = rel
}

func TestMappedDecoderRejects(t *testing.T) {
	m := debeziumMapping(t)
	rel := typedRelationMsg(testRel, "inventory", "outbox", debeziumCols, debeziumOIDs)
	cases := []struct {
		name, column string
		cols         []col
	}{
		{"bytea bad escape", "payload", []col{txt(`\9`), txt("T"), txt("o-1"), null, txt(testUUID), txt("order")}},
		{"bytea short escape", "payload", []col{txt(`ab\01`), txt("T"), txt("o-1"), null, txt(testUUID), txt("order")}},
		{"bytea escape above 377", "payload", []col{txt(`\400`), txt("T"), txt("o-1"), null, txt(testUUID), txt("order")}},
		{"bytea odd digits", "payload", []col{txt(`\xfff`), txt("T"), txt("o-1"), null, txt(testUUID), txt("order")}},
		{"null key", "aggregateid", []col{txt(`\x00`), txt("T"), null, null, txt(testUUID), txt("order")}},
		{"id not a uuid", "id", []col{txt(`\x00`), txt("T"), txt("k"), null, txt("42"), txt("order")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := NewMappedDecoder(&m)
			_, err := decodeOne(t, d, rel, insertMsg(testRel, tc.cols...))
			var re *RowError
			if !errors.As(err, &re) || re.Column != tc.column {
				t.Fatalf("err %v, want a RowError on column %s", err, tc.column)
			}
		})
	}
	// The reject policy refuses a NULL payload.
	m.NullPayload = outbox.NullPayloadReject
	d, _ := NewMappedDecoder(&m)
	_, err := decodeOne(t, d, rel, insertMsg(testRel, null, txt("T"), txt("o-1"), null, txt(testUUID), txt("order")))
	if !errors.Is(err, ErrBadRow) {
		t.Fatalf("NULL payload under reject: %v", err)
	}
}

// TestMappedDecoderIgnoresOtherTables: the contract's table is not the
// mapped one.
func TestMappedDecoderIgnoresOtherTables(t *testing.T) {
	m := debeziumMapping(t)
	d, _ := NewMappedDecoder(&m)
	it, err := func() (Item, error) {
		_, _ = d.Decode(relationMsg(otherRel, "public", "outbox", outboxCols...))
		_, _ = d.Decode(beginMsg(0x1000, 1, 7))
		return d.Decode(insertMsg(otherRel, row(nil)...))
	}()
	if err != nil || it.Kind != KindSkip {
		t.Fatalf("got %v, %v", it.Kind, err)
	}
}

// FuzzDecodeMapped is FuzzDecode for a Debezium-shaped table with a bytea
// payload and an extra header column.
func FuzzDecodeMapped(f *testing.F) {
	rel := typedRelationMsg(testRel, "inventory", "outbox", debeziumCols, debeziumOIDs)
	begin := beginMsg(0x1000, 1, 7)
	for _, p := range []col{txt(`\xff00fe`), txt(`\x`), txt(`\xzz`), txt(`\x0`), txt(`\377\\a`), txt(`\4`), null, toast} {
		f.Add(joinMsgs(rel, begin, insertMsg(testRel, p, txt("T"), txt("k"), txt("t"), txt(testUUID), txt("order")), commitMsg(0x1000, 0x1030, 1)))
	}
	m := debeziumMapping(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := NewMappedDecoder(&m)
		if err != nil {
			t.Fatal(err)
		}
		for len(in) >= 2 {
			n := min(int(binary.BigEndian.Uint16(in)), len(in)-2)
			msg := in[2 : 2+n]
			in = in[2+n:]
			it, err := d.Decode(msg)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadRow) &&
					!errors.Is(err, ErrUnknownRelation) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				continue
			}
			if it.Kind == KindEvent {
				payload := bytes.Clone(it.Event.Payload)
				for i := range msg {
					msg[i] ^= 0xff
				}
				if !bytes.Equal(payload, it.Event.Payload) {
					t.Fatal("event aliases the message buffer")
				}
			}
		}
	})
}

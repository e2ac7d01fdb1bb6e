package pgoutput

import "github.com/eventforge/eventforge/internal/shared/outbox"

// field is the role a column of the outbox plays in an event.
type field uint8

const (
	fieldNone field = iota // created_at and any other column
	fieldEventID
	fieldAggregateType
	fieldAggregateID
	fieldEventType
	fieldPayload
	fieldHeaders
	numFields
)

// columnsOf maps each field to its column name in m; empty for an optional
// field the mapping leaves out.
func columnsOf(m *outbox.Mapping) [numFields]string {
	return [numFields]string{
		fieldEventID:       m.EventID,
		fieldAggregateType: m.Topic,
		fieldAggregateID:   m.Key,
		fieldEventType:     m.EventType,
		fieldPayload:       m.Payload,
		fieldHeaders:       m.Headers,
	}
}

// optional reports whether a field may be absent or NULL: headers always,
// the event type when the mapping has none.
func (d *Decoder) optional(f field) bool {
	return f == fieldHeaders || d.cols[f] == ""
}

func (d *Decoder) fieldOf(name []byte) field {
	for f := fieldEventID; f < numFields; f++ {
		if d.cols[f] != "" && string(name) == d.cols[f] {
			return f
		}
	}
	return fieldNone
}

// extraOf is the index in d.extras of the extra header column name; -1 if none.
func (d *Decoder) extraOf(name []byte) int {
	for i, x := range d.extras {
		if string(name) == x.Column {
			return i
		}
	}
	return -1
}

// Type OIDs of the payload column that change how it is read.
const (
	oidBytea   = 17
	oidText    = 25
	oidVarchar = 1043
	oidBpchar  = 1042
	oidJSON    = 114
	oidJSONB   = 3802
)

// relation is what a Relation message told us about one table.
type relation struct {
	name   string // schema.table, for errors
	target bool   // the configured outbox table
	ncols  int
	// fields[i] is the role of column i; only kept for the target.
	fields []field
	// extras[i] is the extra header index of column i, or -1.
	extras []int
	// oids[i] is the type OID of column i: how a binary value is read.
	oids        []uint32
	payloadKind outbox.PayloadKind
	jsonChecked bool // the payload column is json or jsonb: the server validated it
}

// decodeRelation reads a Relation message (after its type byte).
func (d *Decoder) decodeRelation(r *reader) error {
	id := r.u32()
	namespace := r.cstring()
	name := r.cstring()
	r.u8() // replica identity
	ncols := int(r.u16())
	target := string(namespace) == d.schema && string(name) == d.table
	rel := &relation{name: string(namespace) + "." + string(name), target: target, ncols: ncols}
	if target {
		rel.fields = make([]field, 0, ncols)
		rel.extras = make([]int, 0, ncols)
		rel.oids = make([]uint32, 0, ncols)
	}
	for i := 0; i < ncols && !r.short; i++ {
		r.u8() // flags: part of the key
		col := r.cstring()
		oid := r.u32()
		r.u32() // type modifier
		if target {
			f := d.fieldOf(col)
			rel.fields = append(rel.fields, f)
			rel.extras = append(rel.extras, d.extraOf(col))
			rel.oids = append(rel.oids, oid)
			if f == fieldPayload {
				rel.payloadKind = payloadKind(oid)
				rel.jsonChecked = oid == oidJSON || oid == oidJSONB
			}
		}
	}
	if err := r.done("relation"); err != nil {
		return err
	}
	d.relations[id] = rel
	return nil
}

// payloadKind maps the payload column's type OID (a domain's is its own:
// then JSON is assumed, as for json and jsonb).
func payloadKind(oid uint32) outbox.PayloadKind {
	switch oid {
	case oidBytea:
		return outbox.PayloadBinary
	case oidText, oidVarchar, oidBpchar:
		return outbox.PayloadText
	}
	return outbox.PayloadJSON
}

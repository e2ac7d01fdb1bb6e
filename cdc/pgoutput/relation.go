package pgoutput

// field is the role a column of the outbox plays in an event.
type field uint8

const (
	fieldNone field = iota // created_at and any extra column
	fieldEventID
	fieldAggregateType
	fieldAggregateID
	fieldEventType
	fieldPayload
	fieldHeaders
	numFields
)

// columnNames maps each field to its outbox column name.
var columnNames = [numFields]string{
	fieldEventID:       "event_id",
	fieldAggregateType: "aggregate_type",
	fieldAggregateID:   "aggregate_id",
	fieldEventType:     "event_type",
	fieldPayload:       "payload",
	fieldHeaders:       "headers",
}

func fieldOf(name []byte) field {
	for f := fieldEventID; f < numFields; f++ {
		if string(name) == columnNames[f] {
			return f
		}
	}
	return fieldNone
}

// relation is what a Relation message told us about one table.
type relation struct {
	name   string // schema.table, for errors
	target bool   // the configured outbox table
	ncols  int
	// fields[i] is the role of column i; only kept for the target.
	fields []field
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
	}
	for i := 0; i < ncols && !r.short; i++ {
		r.u8() // flags: part of the key
		col := r.cstring()
		r.u32() // type oid
		r.u32() // type modifier
		if target {
			rel.fields = append(rel.fields, fieldOf(col))
		}
	}
	if err := r.done("relation"); err != nil {
		return err
	}
	d.relations[id] = rel
	return nil
}

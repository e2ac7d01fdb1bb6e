package pgoutput

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Tuple column kinds (TupleData).
const (
	tupleNull      = 'n'
	tupleUnchanged = 'u' // unchanged TOASTed value: not sent
	tupleText      = 't'
	tupleBinary    = 'b'
)

// value is one column of a row as received: its kind and, for text, its
// bytes (aliasing the message buffer).
type value struct {
	kind byte
	data []byte
}

// decodeTuple reads TupleData and keeps the columns the outbox needs; a
// binary one is turned into text (see fromBinary), with buf as scratch.
func decodeTuple(r *reader, rel *relation, vals *[numFields]value, extras []value, buf *[]byte) error {
	*buf = (*buf)[:0]
	n := int(r.u16())
	if !r.short && n != rel.ncols {
		return &RowError{Relation: rel.name, Column: "*",
			Reason: fmt.Sprintf("row has %d columns, relation has %d", n, rel.ncols)}
	}
	for i := 0; i < n && !r.short; i++ {
		v := value{kind: r.u8()}
		switch v.kind {
		case tupleNull, tupleUnchanged:
		case tupleText, tupleBinary:
			v.data = r.take(int(r.u32()))
		default:
			if !r.short {
				return malformed("column %d has tuple kind %q", i, v.kind)
			}
		}
		f, x := rel.fields[i], rel.extras[i]
		if f == fieldNone && x < 0 {
			continue
		}
		if v.kind == tupleBinary && !r.short {
			var err error
			if v, err = fromBinary(v, rel.oids[i], f, buf); err != nil {
				return err
			}
		}
		if f != fieldNone {
			vals[f] = v
		}
		if x >= 0 {
			extras[x] = v
		}
	}
	return r.done("insert")
}

// event builds the outbox event from the columns of a row. Only the event
// itself, its aggregate id and its payload are allocated on this path; the
// low-cardinality strings are interned.
func (d *Decoder) event(rel *relation, vals *[numFields]value) (*outbox.Event, error) {
	if err := d.checkRequired(rel, vals); err != nil {
		return nil, err
	}
	id, err := eventID(vals[fieldEventID])
	if err != nil {
		return nil, &RowError{Relation: rel.name, Column: d.cols[fieldEventID],
			AggregateType: string(vals[fieldAggregateType].data),
			Reason:        fmt.Sprintf("%q is not a UUID", truncate(vals[fieldEventID].data))}
	}
	headers, err := d.headers(vals[fieldHeaders])
	if err != nil {
		return nil, &RowError{Relation: rel.name, Column: d.cols[fieldHeaders], EventID: id,
			AggregateType: string(vals[fieldAggregateType].data), Reason: err.Error()}
	}
	headers = d.spanContextHeaders(d.extraHeaders(headers))
	kind, checked := rel.payloadKind, rel.jsonChecked
	if d.kindSet {
		kind, checked = d.kind, d.jsonChecked
	}
	payload, err := d.payload(vals[fieldPayload], kind)
	if err != nil {
		return nil, &RowError{Relation: rel.name, Column: d.cols[fieldPayload], EventID: id,
			AggregateType: string(vals[fieldAggregateType].data), Reason: err.Error()}
	}
	e := &d.scratch
	if !d.borrow {
		e, payload = new(outbox.Event), bytes.Clone(payload)
	}
	*e = outbox.Event{
		ID:            id,
		AggregateType: d.intern(vals[fieldAggregateType].data),
		AggregateID:   string(vals[fieldAggregateID].data),
		EventType:     d.intern(vals[fieldEventType].data),
		Payload:       payload,
		PayloadKind:   kind,
		JSONChecked:   checked && kind == outbox.PayloadJSON,
		NoPayload:     vals[fieldPayload].kind == tupleNull,
		Headers:       headers,
		CommitTime:    d.commitTime,
	}
	return e, nil
}

// eventID reads the event id: text, or a uuid's 16 bytes.
func eventID(v value) (uuid.UUID, error) {
	if v.kind == kindUUIDBytes {
		return uuid.FromBytes(v.data)
	}
	return uuid.ParseBytes(v.data)
}

// payload is the payload column's bytes: bytea arrives in text format, as
// \x and hex digits (bytea_output = 'hex', the default) or in the escape
// format, and is decoded into a scratch buffer, which a borrowed event
// aliases; other types as received. NULL (allowed only under the tombstone
// policy) is nil.
func (d *Decoder) payload(v value, kind outbox.PayloadKind) ([]byte, error) {
	if v.kind == tupleNull || v.kind == kindRawBytes || kind != outbox.PayloadBinary {
		return v.data, nil // a binary bytea arrives as its bytes
	}
	if len(v.data) < 2 || v.data[0] != '\\' || v.data[1] != 'x' {
		return d.unescapeBytea(v.data)
	}
	hexDigits := v.data[2:]
	n := hex.DecodedLen(len(hexDigits))
	if cap(d.bytea) < n {
		d.bytea = make([]byte, n)
	}
	d.bytea = d.bytea[:n]
	if _, err := hex.Decode(d.bytea, hexDigits); err != nil {
		return nil, fmt.Errorf("bytea value: %w", err)
	}
	return d.bytea, nil
}

// unescapeBytea decodes bytea's escape output format: \\ is a backslash,
// \nnn an octal byte, anything else itself.
func (d *Decoder) unescapeBytea(b []byte) ([]byte, error) {
	out := d.bytea[:0]
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(b) && b[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(b) && isOctal(b[i+1]) && b[i+1] <= '3' && isOctal(b[i+2]) && isOctal(b[i+3]):
			out = append(out, (b[i+1]-'0')<<6|(b[i+2]-'0')<<3|(b[i+3]-'0'))
			i += 3
		default:
			return nil, fmt.Errorf("bytea value %q: invalid escape at byte %d", truncate(b), i)
		}
	}
	d.bytea = out
	return out, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// extraHeaders adds the extra header columns of the row to headers: the
// text of each non-NULL value, under its header name.
func (d *Decoder) extraHeaders(headers map[string]string) map[string]string {
	for i, x := range d.extras {
		v := d.extraVals[i]
		if v.kind != tupleText {
			continue
		}
		if headers == nil {
			headers = make(map[string]string, len(d.extras))
		}
		headers[x.Header] = string(v.data)
	}
	return headers
}

// checkRequired rejects a row whose required columns are absent, NULL,
// unchanged-TOAST or binary. headers is optional: absent or NULL means none;
// so is an event type the mapping leaves out, and a NULL payload under the
// tombstone policy.
func (d *Decoder) checkRequired(rel *relation, vals *[numFields]value) error {
	for f := fieldEventID; f < numFields; f++ {
		if d.cols[f] == "" {
			continue
		}
		reason := d.missing(f, vals[f].kind)
		if reason == "" {
			continue
		}
		re := &RowError{Relation: rel.name, Column: d.cols[f], EventID: readableID(vals[fieldEventID]), Reason: reason}
		if v := vals[fieldAggregateType]; v.kind == tupleText {
			re.AggregateType = string(v.data)
		}
		return re
	}
	return nil
}

// missing says why a value of kind cannot fill field f, or "" when it can.
func (d *Decoder) missing(f field, kind byte) string {
	switch kind {
	case 0:
		if !d.optional(f) {
			return "column is missing from the relation"
		}
	case tupleNull:
		if !d.optional(f) && (f != fieldPayload || !d.tombstone) {
			return "value is NULL"
		}
	case tupleUnchanged:
		return "value is an unchanged TOAST value (not sent)"
	case tupleBinary:
		return "value is in binary format"
	}
	return ""
}

// readableID is the event id of a refused row, for its error: uuid.Nil when
// it cannot be read (a partly parsed UUID would name an event that does not
// exist).
func readableID(v value) uuid.UUID {
	if v.kind != tupleText && v.kind != kindUUIDBytes {
		return uuid.Nil
	}
	if id, err := eventID(v); err == nil {
		return id
	}
	return uuid.Nil
}

// headers decodes the headers column: the string entries of a JSON object.
// A JSON value that is not an object (an array, a scalar) has no string
// entries, so it yields no headers rather than stopping the relay.
func (d *Decoder) headers(v value) (map[string]string, error) {
	if v.kind != tupleText {
		return nil, nil
	}
	raw := bytes.TrimSpace(v.data)
	switch {
	case len(raw) == 0 || string(raw) == "{}":
		return nil, nil
	case raw[0] == '{':
		return outbox.StringHeaders(raw)
	case json.Valid(raw):
		return nil, nil
	default:
		return nil, fmt.Errorf("%q is not JSON", truncate(raw))
	}
}

func truncate(b []byte) []byte {
	const max = 64
	if len(b) > max {
		return b[:max]
	}
	return b
}

// maxInterned bounds the intern table; past it strings are allocated.
const (
	maxInterned    = 1024
	maxInternedLen = 128
)

// intern returns b as a string, reusing an earlier copy for the
// low-cardinality columns (aggregate and event types).
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.interned[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(d.interned) < maxInterned && len(b) <= maxInternedLen {
		d.interned[s] = s
	}
	return s
}

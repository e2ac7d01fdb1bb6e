package pgoutput

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// The relay asks pgoutput for binary tuple data where it can (the `binary`
// option, PostgreSQL 14 and later): the WAL sender then skips the text
// output functions of uuid and timestamptz columns and sends a bytea payload
// as its bytes instead of hex, which takes work off the WAL sender, the
// usual bottleneck of a drain. The columns the outbox needs are turned back
// into exactly the text PostgreSQL would have sent, so a record is the same
// byte for byte in either format. A needed column of a type without a
// decoding here fails with ErrBinaryType, and the relay streams in text.

// ErrBinaryType: a column the outbox needs arrived in binary format with a
// type the decoder cannot read in binary. It wraps ErrUnsupported.
var ErrBinaryType = fmt.Errorf("%w: binary value of a type without a binary decoding", ErrUnsupported)

// Internal value kinds that binary data is normalised to, besides text.
const (
	kindUUIDBytes = 'U' // a uuid's 16 bytes: the event id
	kindRawBytes  = 'R' // a bytea payload's bytes
)

// Type OIDs read in binary format, beside the payload's in relation.go.
const (
	oidName = 19
	oidUUID = 2950
)

// jsonbVersion is the first byte of jsonb's binary format, before its text.
const jsonbVersion = 1

// fromBinary turns v, a binary value of a column with type oid playing role
// f, into a text value (or, for an event id or a bytea payload, into the
// bytes the event is built from). buf is scratch for a uuid's text.
func fromBinary(v value, oid uint32, f field, buf *[]byte) (value, error) {
	switch oid {
	case oidText, oidVarchar, oidBpchar, oidName, oidJSON:
		return value{kind: tupleText, data: v.data}, nil
	case oidJSONB:
		if len(v.data) == 0 || v.data[0] != jsonbVersion {
			return v, malformed("jsonb value with binary version %v", firstByte(v.data))
		}
		return value{kind: tupleText, data: v.data[1:]}, nil
	case oidUUID:
		if len(v.data) != 16 {
			return v, malformed("uuid value of %d bytes", len(v.data))
		}
		if f == fieldEventID {
			return value{kind: kindUUIDBytes, data: v.data}, nil
		}
		return value{kind: tupleText, data: uuidText(v.data, buf)}, nil
	case oidBytea:
		if f == fieldPayload {
			return value{kind: kindRawBytes, data: v.data}, nil
		}
	}
	return v, fmt.Errorf("%w: column of type oid %d", ErrBinaryType, oid)
}

// uuidText appends the canonical text of a uuid's 16 bytes to *buf and
// returns it; *buf keeps growing until the row is decoded.
func uuidText(b []byte, buf *[]byte) []byte {
	var text []byte
	*buf, text = outbox.AppendUUID(*buf, uuid.UUID(b))
	return text
}

func firstByte(b []byte) any {
	if len(b) == 0 {
		return "none"
	}
	return b[0]
}

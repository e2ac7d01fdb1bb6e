package pgoutput

import (
	"bytes"
	"encoding/binary"
	"time"
)

// reader reads the big-endian fields of one message. An overrun sets short
// and yields zero values, so a decode function reads every field and checks
// once at the end; nothing ever indexes past the buffer.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) take(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.short, r.b = true, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// cstring returns the bytes of a NUL-terminated string, without the NUL.
func (r *reader) cstring() []byte {
	i := bytes.IndexByte(r.b, 0)
	if i < 0 {
		r.short, r.b = true, nil
		return nil
	}
	v := r.b[:i:i]
	r.b = r.b[i+1:]
	return v
}

// pgEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in Unix
// microseconds.
const pgEpochMicros = 946_684_800_000_000

// timestamp reads a PostgreSQL timestamp: microseconds since 2000-01-01 UTC.
func (r *reader) timestamp() time.Time {
	return time.UnixMicro(int64(r.u64()) + pgEpochMicros)
}

// done reports an error if a field overran the message or bytes are left.
func (r *reader) done(what string) error {
	if r.short {
		return malformed("%s message is truncated", what)
	}
	if len(r.b) != 0 {
		return malformed("%s message has %d trailing bytes", what, len(r.b))
	}
	return nil
}

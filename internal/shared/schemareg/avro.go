package schemareg

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// avroCodec writes JSON values in Avro's binary encoding under one schema
// and reads them back as JSON. The rules for a JSON writer:
//
//   - a record is an object with every field of the schema: a field left
//     out takes its default, and one without a default is a mismatch; a
//     key that names no field is a mismatch (nothing is dropped silently);
//   - an optional field is a union with "null" (declared with "default":
//     null so that writers may leave it out): null or the value itself;
//   - a union's value is written as the value itself, which goes to the
//     first branch that takes it, or in Avro's JSON form {"branch": value}
//     when the one key names a branch (a type name or a named type's full
//     or short name);
//   - int and long take integers in their range, float and double any
//     number; enum a symbol; bytes and fixed a string of code points 0-255
//     (Avro's JSON encoding of bytes); logical types their underlying type.
type avroCodec struct {
	schema avro.Schema
	w      *avroWriter
}

func newAvroCodec(text string) (*avroCodec, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("parse avro schema: %w", err)
	}
	w, err := newAvroWriter(s)
	if err != nil {
		return nil, fmt.Errorf("avro schema defaults: %w", err)
	}
	return &avroCodec{schema: s, w: w}, nil
}

func (c *avroCodec) encode(dst, payload []byte) ([]byte, error) {
	return c.w.write(dst, payload, c.schema)
}

func (c *avroCodec) decode(dst, body []byte) ([]byte, error) {
	r := avroReader{b: body}
	dst, err := r.value(dst, c.schema)
	if err == nil && r.i != len(r.b) {
		err = fmt.Errorf("%d bytes after the value", len(r.b)-r.i)
	}
	return dst, err
}

// branchNamed is the index of the union branch named k, or -1.
func branchNamed(types avro.Schemas, k string) int {
	for i, t := range types {
		if n, ok := t.(avro.NamedSchema); ok && (n.FullName() == k || n.Name() == k) {
			return i
		}
		if r, ok := t.(*avro.RefSchema); ok && (r.Schema().FullName() == k || r.Schema().Name() == k) {
			return i
		}
		if string(t.Type()) == k {
			return i
		}
	}
	return -1
}

func unionNames(types avro.Schemas) string {
	out := "["
	for i, t := range types {
		if i > 0 {
			out += ", "
		}
		if n, ok := t.(avro.NamedSchema); ok {
			out += n.FullName()
		} else {
			out += string(t.Type())
		}
	}
	return out + "]"
}

// appendVarint appends Avro's zig-zag varint of i.
func appendVarint(dst []byte, i int64) []byte {
	return binary.AppendUvarint(dst, uint64((i<<1)^(i>>63)))
}

// avroReader reads Avro's binary encoding and writes it as JSON.
type avroReader struct {
	b []byte
	i int
}

func (r *avroReader) long() (int64, error) {
	u, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 {
		return 0, fmt.Errorf("bad varint at byte %d", r.i)
	}
	r.i += n
	return int64(u>>1) ^ -int64(u&1), nil
}

func (r *avroReader) take(n int64) ([]byte, error) {
	if n < 0 || int64(len(r.b)-r.i) < n {
		return nil, fmt.Errorf("%d bytes wanted at byte %d, %d left", n, r.i, len(r.b)-r.i)
	}
	out := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return out, nil
}

func (r *avroReader) value(dst []byte, s avro.Schema) ([]byte, error) {
	switch s := s.(type) {
	case *avro.RefSchema:
		return r.value(dst, s.Schema())
	case *avro.RecordSchema:
		return r.record(dst, s)
	case *avro.UnionSchema:
		i, err := r.long()
		if err != nil {
			return dst, err
		}
		if i < 0 || int(i) >= len(s.Types()) {
			return dst, fmt.Errorf("union branch %d of %d", i, len(s.Types()))
		}
		return r.value(dst, s.Types()[i])
	case *avro.ArraySchema:
		return r.blocks(dst, '[', ']', func(dst []byte) ([]byte, error) { return r.value(dst, s.Items()) })
	case *avro.MapSchema:
		return r.blocks(dst, '{', '}', func(dst []byte) ([]byte, error) {
			k, err := r.bytes()
			if err != nil {
				return dst, err
			}
			dst = appendJSONString(dst, string(k))
			return r.value(append(dst, ':'), s.Values())
		})
	case *avro.EnumSchema:
		i, err := r.long()
		if err != nil {
			return dst, err
		}
		sym, ok := s.Symbol(int(i))
		if !ok {
			return dst, fmt.Errorf("enum %s has no symbol %d", s.FullName(), i)
		}
		return appendJSONString(dst, sym), nil
	case *avro.FixedSchema:
		b, err := r.take(int64(s.Size()))
		return appendCodePoints(dst, b), err
	case *avro.PrimitiveSchema, *avro.NullSchema:
		return r.primitive(dst, s.Type())
	}
	return dst, fmt.Errorf("unsupported avro type %s", s.Type())
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

func (r *avroReader) record(dst []byte, s *avro.RecordSchema) ([]byte, error) {
	dst = append(dst, '{')
	for i, f := range s.Fields() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, f.Name()), ':')
		var err error
		if dst, err = r.value(dst, f.Type()); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// blocks reads an array's or a map's blocks of items.
func (r *avroReader) blocks(dst []byte, open, closing byte, item func([]byte) ([]byte, error)) ([]byte, error) {
	dst = append(dst, open)
	first := true
	for {
		n, err := r.long()
		if err != nil {
			return dst, err
		}
		if n == 0 {
			return append(dst, closing), nil
		}
		if n < 0 { // a block with its size in bytes
			n = -n
			if _, err := r.long(); err != nil {
				return dst, err
			}
		}
		for ; n > 0; n-- {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if dst, err = item(dst); err != nil {
				return dst, err
			}
		}
	}
}

func (r *avroReader) primitive(dst []byte, t avro.Type) ([]byte, error) {
	switch t {
	case avro.Null:
		return append(dst, "null"...), nil
	case avro.Boolean:
		b, err := r.take(1)
		if err != nil {
			return dst, err
		}
		return strconv.AppendBool(dst, b[0] != 0), nil
	case avro.Int, avro.Long:
		i, err := r.long()
		return strconv.AppendInt(dst, i, 10), err
	case avro.Float:
		b, err := r.take(4)
		if err != nil {
			return dst, err
		}
		return appendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32)
	case avro.Double:
		b, err := r.take(8)
		if err != nil {
			return dst, err
		}
		return appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64)
	case avro.String:
		b, err := r.bytes()
		if err != nil {
			return dst, err
		}
		if !utf8.Valid(b) {
			return dst, fmt.Errorf("a string that is not UTF-8")
		}
		return appendJSONString(dst, string(b)), nil
	case avro.Bytes:
		b, err := r.bytes()
		return appendCodePoints(dst, b), err
	}
	return dst, fmt.Errorf("unsupported avro type %s", t)
}

func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%v has no JSON form", f)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits), nil
}

// appendCodePoints appends bytes as Avro's JSON form: a string of code
// points 0-255.
func appendCodePoints(dst, b []byte) []byte {
	s := make([]rune, len(b))
	for i, c := range b {
		s[i] = rune(c)
	}
	return appendJSONString(dst, string(s))
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

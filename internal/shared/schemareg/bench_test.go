package schemareg

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// The bench's order.created payload, about 100 bytes.
const benchPayload = `{"id":"o-run-123456","customer":"c42","amount":4711,"currency":"EUR"}`

const benchSchema = `{"type":"record","name":"OrderCreated","fields":[
 {"name":"id","type":"string"},{"name":"customer","type":"string"},
 {"name":"amount","type":"long"},{"name":"currency","type":"string"}]}`

func benchEncoder(b *testing.B, format, schema string, typ sr.SchemaType) *Encoder {
	reg := srfake.New()
	b.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, 1, sr.Schema{Schema: schema, Type: typ})
	enc, err := NewEncoder(Config{URL: reg.URL(), Format: format}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

func benchConvert(b *testing.B, c outbox.ValueConverter) {
	e := &outbox.Event{AggregateType: "orders", Payload: []byte(benchPayload), JSONChecked: true}
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		var err error
		if buf, _, err = c.AppendValue(buf[:0], e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValueJSON is the relay's default value (compacted JSON).
func BenchmarkValueJSON(b *testing.B) {
	c, err := outbox.NewValueConverter(outbox.ConverterCompact, outbox.ColumnSchemas{})
	if err != nil {
		b.Fatal(err)
	}
	benchConvert(b, c)
}

// BenchmarkValueAvro: an Avro value, its schema from the cache.
func BenchmarkValueAvro(b *testing.B) {
	benchConvert(b, benchEncoder(b, FormatAvro, benchSchema, sr.TypeAvro))
}

// BenchmarkValueJSONSchema: validated and framed, from the cache.
func BenchmarkValueJSONSchema(b *testing.B) {
	benchConvert(b, benchEncoder(b, FormatJSONSchema, `{"type":"object","properties":{"amount":{"type":"integer"}}}`, sr.TypeJSON))
}

// BenchmarkValueProtobuf: a Protobuf value, from the cache.
func BenchmarkValueProtobuf(b *testing.B) {
	benchConvert(b, benchEncoder(b, FormatProtobuf, `syntax = "proto3"; message OrderCreated { string id = 1; string customer = 2; int64 amount = 3; string currency = 4; }`, sr.TypeProtobuf))
}

// BenchmarkValueAvroUncached: what the cache saves: every value asks the
// (loopback, in-memory) registry for the subject's latest version.
func BenchmarkValueAvroUncached(b *testing.B) {
	enc := benchEncoder(b, FormatAvro, benchSchema, sr.TypeAvro)
	enc.reg.ttl = -1
	benchConvert(b, enc)
}

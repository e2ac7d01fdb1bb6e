package bench

import (
	"context"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// orderCreatedAvro is the Avro schema of the bench's order.created payload.
const orderCreatedAvro = `{"type":"record","name":"OrderCreated","namespace":"bench","fields":[
 {"name":"id","type":"string"},{"name":"customer","type":"string"},
 {"name":"amount","type":"long"},{"name":"currency","type":"string"}]}`

// serveRegistry serves an in-memory Confluent-compatible schema registry
// on loopback with the order.created schema (subject order.created: the
// relays run with --subject-name-strategy record); the returned function
// stops it.
func (r *runner) serveRegistry() func() {
	reg := srfake.New()
	reg.SeedSchema("order.created", 1, 1, sr.Schema{Schema: orderCreatedAvro, Type: sr.TypeAvro})
	r.registryURL = reg.URL()
	return reg.Close
}

// inValueSchemas runs stage with JSON values, then, with --value-schema,
// again with the relay writing values in that format; those rows are
// marked.
func (r *runner) inValueSchemas(ctx context.Context, stage func(context.Context) []Row) []Row {
	rows := stage(ctx)
	if r.cfg.ValueSchema == "" || ctx.Err() != nil {
		return rows
	}
	r.valueSchema = r.cfg.ValueSchema
	defer func() { r.valueSchema = "" }()
	for _, row := range stage(ctx) {
		row.ValueSchema = r.valueSchema
		row.Shape += ", " + r.valueSchema + " values"
		rows = append(rows, row)
	}
	return rows
}

package schemareg

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"

	"github.com/eventforge/eventforge/internal/testsupport/srtest"
)

// TestConfluentReadsBack: Confluent's Python deserializers read every value
// the encoder wrote, for each format, equal to its payload; with schema
// evolution (a backward-compatible second version: old and new records
// both read).
func TestConfluentReadsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Confluent's Python client")
	}
	reg := newFake(t)
	v2 := strings.Replace(orderV1, `{"name":"paid","type":"boolean"},`, `{"name":"paid","type":"boolean"},{"name":"coupon","type":["null","string"],"default":null},`, 1)
	protoV2 := strings.Replace(orderProto, "repeated string tags = 4;", "repeated string tags = 4;\n  string coupon = 5;", 1)
	jsonV2 := strings.Replace(orderJSONSchema, `"qty":{"type":"integer","minimum":1}`, `"qty":{"type":"integer","minimum":1},"coupon":{"type":"string"}`, 1)
	type value struct {
		format, topic, payload, want string
		evolve                       func()
	}
	values := []value{
		{format: FormatAvro, topic: "orders", payload: `{"id":"o1","qty":2,"price":9.5,"paid":true,"note":"gift","tags":["a"],"attrs":{"x":1},"status":"DONE","lines":[{"sku":"s","n":3}]}`},
		{format: FormatAvro, topic: "orders", payload: `{"id":"o2","qty":1,"price":1.25,"paid":false}`,
			want: `{"id":"o2","qty":1,"price":1.25,"paid":false,"note":null,"tags":[],"attrs":{},"status":"NEW","lines":[]}`},
		{format: FormatAvro, topic: "orders", payload: `{"id":"o3","qty":1,"price":2,"paid":false,"coupon":"C"}`,
			want:   `{"id":"o3","qty":1,"price":2,"paid":false,"coupon":"C","note":null,"tags":[],"attrs":{},"status":"NEW","lines":[]}`,
			evolve: func() { reg.SeedSchema("orders-value", 2, 11, sr.Schema{Schema: v2, Type: sr.TypeAvro}) }},
		{format: FormatProtobuf, topic: "orders.proto", payload: `{"id":"p1","qty":4,"price":2.5,"tags":["t"]}`},
		{format: FormatProtobuf, topic: "orders.proto", payload: `{"id":"p2","qty":5,"price":1,"coupon":"C"}`,
			evolve: func() { reg.SeedSchema("orders.proto-value", 2, 12, sr.Schema{Schema: protoV2, Type: sr.TypeProtobuf}) }},
		{format: FormatJSONSchema, topic: "orders.json", payload: `{"id":"j1","qty":3}`},
		{format: FormatJSONSchema, topic: "orders.json", payload: `{"id":"j2","qty":3,"coupon":"C"}`,
			evolve: func() { reg.SeedSchema("orders.json-value", 2, 13, sr.Schema{Schema: jsonV2, Type: sr.TypeJSON}) }},
	}
	encs := map[string]*Encoder{}
	var reqs []srtest.Request
	for _, v := range values {
		if v.evolve != nil {
			v.evolve()
		}
		enc := encs[v.format]
		if enc == nil {
			enc = newEnc(t, reg.URL(), v.format, nil)
			enc.reg.ttl = 0 // a new version is seen at once
			encs[v.format] = enc
		}
		out, _, err := enc.AppendValue(nil, event(v.topic, v.payload, nil))
		if err != nil {
			t.Fatalf("%s: %v", v.payload, err)
		}
		req := srtest.Request{Format: v.format, Topic: v.topic, Value: out}
		if v.format == FormatProtobuf {
			id, _, _ := SplitFrame(out)
			s, _ := enc.reg.ByID(t.Context(), id)
			req.Descriptor, _ = proto.Marshal(protodesc.ToFileDescriptorProto(s.codec.(*protoCodec).msg.ParentFile()))
		}
		reqs = append(reqs, req)
	}
	res := srtest.Read(t, reg.URL(), reqs)
	ids := map[int]bool{}
	for i, r := range res {
		want := values[i].want
		if want == "" {
			want = values[i].payload
		}
		if r.Error != "" || !srtest.JSONEqual(r.Value, []byte(want)) {
			t.Errorf("%s value %d: read %s %s, want %s", values[i].format, i, r.Value, r.Error, want)
		}
		ids[r.ID] = true
	}
	for _, id := range []int{1, 2, 3, 11, 12, 13} { // both versions of each format
		if !ids[id] {
			t.Errorf("no value of schema id %d read", id)
		}
	}
}

package schemareg

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/srtest"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},
 {"name":"qty","type":"int"},
 {"name":"price","type":"double"},
 {"name":"paid","type":"boolean"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"},"default":[]},
 {"name":"attrs","type":{"type":"map","values":"long"},"default":{}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","DONE"]},"default":"NEW"},
 {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[{"name":"sku","type":"string"},{"name":"n","type":"long"}]}},"default":[]}
]}`

const orderProto = `syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int32 qty = 2;
  double price = 3;
  repeated string tags = 4;
}`

const orderJSONSchema = `{"type":"object","properties":{"id":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["id","qty"],"additionalProperties":false}`

func newFake(t *testing.T) *srfake.Registry {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, 1, sr.Schema{Schema: orderV1, Type: sr.TypeAvro})
	reg.SeedSchema("orders.proto-value", 1, 2, sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf})
	reg.SeedSchema("orders.json-value", 1, 3, sr.Schema{Schema: orderJSONSchema, Type: sr.TypeJSON})
	return reg
}

func newEnc(t *testing.T, url, format string, pr prometheus.Registerer) *Encoder {
	t.Helper()
	enc, err := NewEncoder(Config{URL: url, Format: format}, pr)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func event(topic, payload string, headers map[string]string) *outbox.Event {
	return &outbox.Event{ID: uuid.New(), AggregateType: topic, AggregateID: "k", EventType: "OrderCreated", Payload: []byte(payload), Headers: headers}
}

// roundTrip encodes and decodes a payload: the JSON read back must equal it.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	reg := newFake(t)
	dec, err := NewDecoder(Config{URL: reg.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, format, topic, payload, want string
		id                                 int
	}{
		{"avro full", FormatAvro, "orders", `{"id":"o1","qty":2,"price":9.5,"paid":true,"note":"gift","tags":["a","b"],"attrs":{"x":1,"y":-2},"status":"DONE","lines":[{"sku":"s","n":3}]}`, "", 1},
		{"avro defaults", FormatAvro, "orders", `{"id":"o2","qty":1,"price":1,"paid":false}`,
			`{"id":"o2","qty":1,"price":1,"paid":false,"note":null,"tags":[],"attrs":{},"status":"NEW","lines":[]}`, 1},
		{"avro union wrapped", FormatAvro, "orders", `{"id":"o3","qty":1,"price":1,"paid":false,"note":{"string":"w"}}`,
			`{"id":"o3","qty":1,"price":1,"paid":false,"note":"w","tags":[],"attrs":{},"status":"NEW","lines":[]}`, 1},
		{"protobuf", FormatProtobuf, "orders.proto", `{"id":"p1","qty":4,"price":2.5,"tags":["t"]}`, "", 2},
		{"json schema", FormatJSONSchema, "orders.json", `{"id":"j1", "qty":3}`, `{"id":"j1","qty":3}`, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc := newEnc(t, reg.URL(), c.format, nil)
			out, present, err := enc.AppendValue(nil, event(c.topic, c.payload, nil))
			if err != nil || !present {
				t.Fatalf("encode: %v %v", present, err)
			}
			id, _, err := SplitFrame(out)
			if err != nil || id != c.id {
				t.Fatalf("frame: id %d, %v; want id %d", id, err, c.id)
			}
			got, err := dec.Decode(context.Background(), out)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			want := c.want
			if want == "" {
				want = c.payload
			}
			assertJSONEqual(t, got, want)
		})
	}
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	if !srtest.JSONEqual(got, []byte(want)) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// Mismatches are the event's: a *MismatchError (or another error) that
// does not wrap ErrUnavailable, with the path, and counted by topic.
func TestEncodeMismatch(t *testing.T) {
	reg := newFake(t)
	cases := []struct {
		name, format, topic, payload, path, reason string
	}{
		{"wrong type", FormatAvro, "orders", `{"id":"o","qty":"2","price":1,"paid":true}`, "$.qty", "expected int, got string"},
		{"missing", FormatAvro, "orders", `{"id":"o","qty":2,"paid":true}`, "$.price", "missing field without a default"},
		{"unknown field", FormatAvro, "orders", `{"id":"o","qty":2,"price":1,"paid":true,"zz":1}`, "$.zz", "not a field of record shop.Order"},
		{"int range", FormatAvro, "orders", `{"id":"o","qty":3000000000,"price":1,"paid":true}`, "$.qty", "out of the range of int"},
		{"nested", FormatAvro, "orders", `{"id":"o","qty":2,"price":1,"paid":true,"lines":[{"sku":"a","n":1},{"sku":"b","n":1.5}]}`, "$.lines[1].n", "is not a long"},
		{"union", FormatAvro, "orders", `{"id":"o","qty":2,"price":1,"paid":true,"note":5}`, "$.note", "expected string, got number 5"},
		{"enum", FormatAvro, "orders", `{"id":"o","qty":2,"price":1,"paid":true,"status":"LOST"}`, "$.status", `"LOST" is not a symbol`},
		{"map value", FormatAvro, "orders", `{"id":"o","qty":2,"price":1,"paid":true,"attrs":{"a":"x"}}`, `$["a"]`, "expected long"},
		{"json schema", FormatJSONSchema, "orders.json", `{"id":"o","qty":0}`, "$.qty", "minimum"},
		{"protobuf", FormatProtobuf, "orders.proto", `{"id":"o","nope":1}`, "$", "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pr := prometheus.NewRegistry()
			enc := newEnc(t, reg.URL(), c.format, pr)
			_, _, err := enc.AppendValue(nil, event(c.topic, c.payload, nil))
			var me *MismatchError
			if !errors.As(err, &me) || outbox.IsUnavailable(err) {
				t.Fatalf("err %v: want a mismatch", err)
			}
			if strings.ReplaceAll(me.Path, "attrs", "") != strings.ReplaceAll(c.path, "attrs", "") && me.Path != "$.attrs"+c.path[1:] {
				t.Errorf("path %s, want %s", me.Path, c.path)
			}
			if !strings.Contains(me.Reason, c.reason) {
				t.Errorf("reason %q, want it to contain %q", me.Reason, c.reason)
			}
			if n := testutil.ToFloat64(enc.reg.m.rejected.WithLabelValues(c.topic)); n != 1 {
				t.Errorf("rejected{topic=%s} = %v, want 1", c.topic, n)
			}
		})
	}
}

// The event's other faults: no subject, a pinned version that does not
// exist, a bytea payload, text that is not JSON, a schema of another format.
func TestEncodeEventFaults(t *testing.T) {
	reg := newFake(t)
	enc := newEnc(t, reg.URL(), FormatAvro, nil)
	bin := event("orders", `{}`, nil)
	bin.PayloadKind = outbox.PayloadBinary
	for name, e := range map[string]*outbox.Event{
		"no subject":     event("nosuch", `{}`, nil),
		"no version":     event("orders", `{}`, map[string]string{HeaderSchemaVersion: "9"}),
		"bad version":    event("orders", `{}`, map[string]string{HeaderSchemaVersion: "x"}),
		"no id":          event("orders", `{}`, map[string]string{HeaderSchemaID: "99"}),
		"bytea":          bin,
		"not json":       event("orders", `{"id":`, nil),
		"other format":   event("orders.proto", `{}`, nil),
		"trailing input": event("orders", `{"id":"o","qty":2,"price":1,"paid":true} 1`, nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := enc.AppendValue(nil, e)
			if err == nil || outbox.IsUnavailable(err) {
				t.Fatalf("err %v: want the event's fault", err)
			}
		})
	}
}

// A pinned version or id picks that schema, not the latest.
func TestEncodePinned(t *testing.T) {
	reg := newFake(t)
	v2 := strings.Replace(orderV1, `{"name":"paid","type":"boolean"},`, `{"name":"paid","type":"boolean"},{"name":"coupon","type":["null","string"],"default":null},`, 1)
	reg.SeedSchema("orders-value", 2, 10, sr.Schema{Schema: v2, Type: sr.TypeAvro})
	enc := newEnc(t, reg.URL(), FormatAvro, nil)
	p := `{"id":"o","qty":2,"price":1,"paid":true}`
	for _, c := range []struct {
		headers map[string]string
		id      int
	}{{nil, 10}, {map[string]string{HeaderSchemaVersion: "1"}, 1}, {map[string]string{HeaderSchemaID: "1"}, 1}, {map[string]string{HeaderSchemaVersion: "2"}, 10}} {
		out, _, err := enc.AppendValue(nil, event("orders", p, c.headers))
		if err != nil {
			t.Fatal(err)
		}
		if id, _, _ := SplitFrame(out); id != c.id {
			t.Errorf("headers %v: id %d, want %d", c.headers, id, c.id)
		}
	}
}

// A registry that does not answer is an outage: the error wraps
// ErrUnavailable, nothing is counted as rejected; a latest version known
// from before keeps being used; once it answers the event encodes.
func TestEncodeOutage(t *testing.T) {
	reg := newFake(t)
	pr := prometheus.NewRegistry()
	enc := newEnc(t, reg.URL(), FormatAvro, pr)
	enc.reg.ttl = 0 // every use of the latest asks again
	p := `{"id":"o","qty":2,"price":1,"paid":true}`
	down := true
	reg.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if down {
			http.Error(w, `{"error_code":50001,"message":"down"}`, http.StatusServiceUnavailable)
		}
		return down
	})
	for _, h := range []map[string]string{nil, {HeaderSchemaID: "1"}, {HeaderSchemaVersion: "1"}} {
		_, _, err := enc.AppendValue(nil, event("orders", p, h))
		if !outbox.IsUnavailable(err) {
			t.Fatalf("headers %v: err %v, want unavailable", h, err)
		}
	}
	if n := testutil.ToFloat64(enc.reg.m.rejected.WithLabelValues("orders")); n != 0 {
		t.Fatalf("rejected %v during an outage", n)
	}
	down = false
	if _, _, err := enc.AppendValue(nil, event("orders", p, nil)); err != nil {
		t.Fatal(err)
	}
	down = true
	if _, _, err := enc.AppendValue(nil, event("orders", p, nil)); err != nil {
		t.Fatalf("known latest during an outage: %v", err)
	}
	// A closed registry (connection refused) too.
	reg.Close()
	enc2 := newEnc(t, reg.URL(), FormatAvro, nil)
	if _, _, err := enc2.AppendValue(nil, event("orders", p, nil)); !outbox.IsUnavailable(err) {
		t.Fatalf("closed registry: %v", err)
	}
}

// Basic and bearer authentication reach the registry; refused credentials
// are an outage, not the event's fault.
func TestAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := dir + "/" + name
		if err := writeFile(p, s+"\n"); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, auth string
		cfg        Config
		ok         bool
	}{
		{"bearer", "Bearer tok", Config{TokenFile: write("tok", "tok")}, true},
		{"bearer wrong", "Bearer tok", Config{TokenFile: write("tok2", "nope")}, false},
		{"basic", "Basic dTpwdw==", Config{Username: "u", PasswordFile: write("pw", "pw")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := srfake.New(srfake.WithAuth(c.auth))
			defer reg.Close()
			reg.SeedSchema("orders-value", 1, 1, sr.Schema{Schema: orderV1, Type: sr.TypeAvro})
			assertReaches(t, c.cfg, reg.URL(), c.ok)
		})
	}
}

// assertReaches checks that an encoder of cfg on url encodes an event
// (ok), or meets an outage.
func assertReaches(t *testing.T, cfg Config, url string, ok bool) {
	t.Helper()
	cfg.URL, cfg.Format = url, FormatAvro
	enc, err := NewEncoder(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = enc.AppendValue(nil, event("orders", `{"id":"o","qty":2,"price":1,"paid":true}`, nil))
	if ok != (err == nil) || (!ok && !outbox.IsUnavailable(err)) {
		t.Fatalf("err %v", err)
	}
}

func TestRegisterFiles(t *testing.T) {
	reg := newFake(t)
	dir := t.TempDir()
	path := dir + "/order.avsc"
	if err := writeFile(path, orderV1); err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(Config{URL: reg.URL(), Format: FormatAvro, Register: []string{"fresh-value=" + path}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.RegisterFiles(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !reg.SubjectExists("fresh-value") {
		t.Fatal("not registered")
	}
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/compatibility/") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"is_compatible":false,"messages":["READER_FIELD_MISSING_DEFAULT_VALUE"]}`))
			return true
		}
		return false
	})
	enc2, _ := NewEncoder(Config{URL: reg.URL(), Format: FormatAvro, Register: []string{"other-value=" + path}}, nil)
	err = enc2.RegisterFiles(context.Background())
	if err == nil || !strings.Contains(err.Error(), "READER_FIELD_MISSING_DEFAULT_VALUE") || reg.SubjectExists("other-value") {
		t.Fatalf("incompatible schema: %v", err)
	}
}

func TestSubjectStrategies(t *testing.T) {
	e := event("orders", `{}`, nil)
	for strategy, want := range map[string]string{StrategyTopic: "pre.orders-value", StrategyRecord: "OrderCreated", StrategyTopicRecord: "pre.orders-OrderCreated"} {
		enc := &Encoder{cfg: Config{SubjectStrategy: strategy, TopicPrefix: "pre."}}
		if got, err := enc.Subject(e); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", strategy, got, err, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Format: "xml", SubjectStrategy: "nope", PasswordFile: "p", CertFile: "c", Register: []string{"bad"}}.Validate(true)
	for _, want := range []string{"--schema-registry-url", "--value-schema", "--subject-name-strategy", "--schema-registry-user", "--schema-registry-key-file", "--register-schema"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %s", err, want)
		}
	}
}

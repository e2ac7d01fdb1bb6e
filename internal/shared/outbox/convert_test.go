package outbox

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// goldenCase is one line of testdata/connect/golden.jsonl: a payload (or
// key) as PostgreSQL prints it and what Debezium 3.6.1's outbox event
// router and Kafka Connect 4.1.1's converters wrote for it, per converter:
// "b64:<bytes>", "tombstone" (no value) or "error: <exception>" (the
// connector's task stops). testdata/connect/generate.sh made the file by
// running the Java code itself.
type goldenCase struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	Payload *string           `json:"payload"`
	NotNull bool              `json:"notnull"`
	Type    string            `json:"type"`
	Key     string            `json:"key"`
	Out     map[string]string `json:"out"`
}

func readGolden(t *testing.T) []goldenCase {
	t.Helper()
	f, err := os.Open("testdata/connect/golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []goldenCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	if len(cases) < 50 {
		t.Fatalf("%d golden cases", len(cases))
	}
	return cases
}

// event is the outbox event of a golden payload case.
func (c goldenCase) event(t *testing.T) *Event {
	e := &Event{ID: uuid.New(), AggregateType: "Order", AggregateID: "k"}
	switch c.Kind {
	case "jsonb", "json":
		e.PayloadKind, e.JSONChecked = PayloadJSON, true
	case "text":
		e.PayloadKind = PayloadText
	case "bytea":
		e.PayloadKind = PayloadBinary
	}
	switch {
	case c.Payload == nil:
		e.NoPayload = true
	case c.Kind == "bytea":
		b, err := base64.StdEncoding.DecodeString(*c.Payload)
		if err != nil {
			t.Fatal(err)
		}
		e.Payload = b
	default:
		e.Payload = []byte(*c.Payload)
	}
	return e
}

// notReproduced are the golden outputs the expanded converters refuse
// (the row is set aside) instead of writing: Debezium merges the schemas
// of an array's differently shaped objects in the order of a Java
// HashSet.
var notReproduced = map[string]bool{
	"jsonb/19 json-expanded": true, "jsonb/19 json-expanded-schemas": true,
	"json/19 json-expanded": true, "json/19 json-expanded-schemas": true,
}

// TestValueConvertersMatchKafkaConnect: every value converter writes, for
// every payload shape, the bytes Debezium's router and Kafka Connect's
// converter wrote for it.
func TestValueConvertersMatchKafkaConnect(t *testing.T) {
	n := 0
	for _, c := range readGolden(t) {
		if strings.HasPrefix(c.Name, "key/") {
			continue
		}
		for form, want := range c.Out {
			t.Run(c.Name+"/"+form, func(t *testing.T) {
				cols := ColumnSchemas{Payload: Column{Type: c.Kind, NotNull: c.NotNull}, PayloadName: "payload"}
				vc, err := NewValueConverter(form, cols)
				if err != nil {
					t.Fatal(err)
				}
				e := c.event(t)
				got, present, err := vc.AppendValue([]byte("prefix"), e)
				label := c.Name + " " + form
				switch {
				case notReproduced[label] || strings.HasPrefix(want, "error: "):
					if !errors.Is(err, errNotReproduced) {
						t.Fatalf("want the row refused (the router's %q), got %q %v", want, got, err)
					}
					return
				case err != nil:
					t.Fatal(err)
				case want == "tombstone":
					if present {
						t.Fatalf("want no value, got %q", got)
					}
					return
				case !present:
					t.Fatal("no value")
				}
				wantBytes, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(want, "b64:"))
				if !bytes.Equal(got, append([]byte("prefix"), wantBytes...)) {
					t.Errorf("\ngot  %s\nwant prefix%s", got, wantBytes)
				}
			})
			n++
		}
	}
	if n < 200 {
		t.Fatalf("only %d forms checked", n)
	}
}

// TestKeyConvertersMatchKafkaConnect: the key converters write what
// Kafka Connect's converters wrote for each key column type.
func TestKeyConvertersMatchKafkaConnect(t *testing.T) {
	for _, c := range readGolden(t) {
		if !strings.HasPrefix(c.Name, "key/") {
			continue
		}
		for form, want := range c.Out {
			t.Run(c.Name+"/"+form, func(t *testing.T) {
				kc, err := NewKeyConverter(form, ColumnSchemas{Key: Column{Type: c.Type, NotNull: c.NotNull}})
				if err != nil {
					t.Fatal(err)
				}
				got, err := kc.AppendKey(nil, &Event{AggregateID: c.Key})
				if err != nil {
					t.Fatal(err)
				}
				wantBytes, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(want, "b64:"))
				if !bytes.Equal(got, wantBytes) {
					t.Errorf("\ngot  %s\nwant %s", got, wantBytes)
				}
			})
		}
	}
}

// TestKeyConverterRefusesNumeric: Debezium writes numeric as a Kafka
// Connect Decimal, which the json key converters do not reproduce; an
// integer column's key that is not an integer is an error, not a number
// written as text.
func TestKeyConverterRefusesNumeric(t *testing.T) {
	if _, err := NewKeyConverter(ConverterJSON, ColumnSchemas{Key: Column{Type: "numeric"}}); err == nil {
		t.Fatal("numeric key accepted")
	}
	if _, err := NewKeyConverter(ConverterString, ColumnSchemas{Key: Column{Type: "numeric"}}); err != nil {
		t.Fatal(err)
	}
	kc, _ := NewKeyConverter(ConverterJSON, ColumnSchemas{Key: Column{Type: "int4"}})
	if _, err := kc.AppendKey(nil, &Event{AggregateID: "1e3"}); !errors.Is(err, errKeyNotInteger) {
		t.Fatalf("err %v", err)
	}
	if _, err := NewValueConverter("avro", ColumnSchemas{}); err == nil {
		t.Fatal("unknown value converter accepted")
	}
}

// failingValue is a value converter that fails with err.
type failingValue struct{ err error }

func (f failingValue) AppendValue(dst []byte, _ *Event) ([]byte, bool, error) {
	return dst, false, f.err
}

// TestBuilderUnavailable: the mapping's ValueEncoder decides the value; an
// error of it wrapping ErrUnavailable reaches OnUnavailable's function
// before Build returns it, any other error does not.
func TestBuilderUnavailable(t *testing.T) {
	outage := fmt.Errorf("registry: %w", ErrUnavailable)
	for _, c := range []struct {
		err   error
		heard bool
	}{{outage, true}, {errors.New("payload does not fit"), false}} {
		m := DefaultMapping()
		m.ValueEncoder = failingValue{c.err}
		var heard error
		b := NewBuilder("").WithFormat(&m).OnUnavailable(func(err error) { heard = err })
		err := b.Build(new(Record), &Event{ID: uuid.New(), AggregateType: "a", Payload: []byte(`{}`)})
		if !errors.Is(err, c.err) || (heard != nil) != c.heard || IsUnavailable(err) != c.heard {
			t.Errorf("%v: Build %v, heard %v", c.err, err, heard)
		}
	}
}

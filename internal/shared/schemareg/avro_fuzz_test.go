package schemareg

import (
	"testing"

	"github.com/eventforge/eventforge/internal/testsupport/srtest"
)

// FuzzAvroJSON: any input is written or refused without a panic, and what
// is written reads back as the same JSON (every field given, so no
// defaults are added).
func FuzzAvroJSON(f *testing.F) {
	c, err := newAvroCodec(`{"type":"record","name":"R","fields":[
 {"name":"s","type":"string"},{"name":"n","type":["null","long","double"]},
 {"name":"a","type":{"type":"array","items":["string","boolean"]}},
 {"name":"m","type":{"type":"map","values":{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}}},
 {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
 {"name":"b","type":"bytes"}]}`)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"s":"x","n":null,"a":[],"m":{},"e":"A","b":""}`,
		`{"s":"\u00e9\n","n":-12,"a":["t",true],"m":{"k":{"x":1}},"e":"B","b":"\u00ff\u0000"}`,
		`{"s":"x","n":1.5e3,"a":[false],"m":{"k":{"x":2147483647}},"e":"A","b":"ab"}`,
		`{"s":"x","n":{"long":3},"a":[],"m":{},"e":"A","b":""}`,
		`{"s":1}`, `[`, `{"s":"x",}`, `"`, `{"s":"\ud800"}`, ` {"s" : "x" } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := c.encode(nil, in)
		if err != nil {
			return
		}
		back, err := c.decode(nil, out)
		if err != nil {
			t.Fatalf("%s written as %x does not read back: %v", in, out, err)
		}
		if !srtest.JSONEqual(back, in) && !wrappedUnion(in) {
			t.Fatalf("%s read back as %s", in, back)
		}
	})
}

// wrappedUnion: an input using Avro's {"branch": value} form reads back
// unwrapped.
func wrappedUnion(in []byte) bool {
	for _, b := range []string{`"long"`, `"double"`, `"null"`, `"string"`, `"boolean"`} {
		if contains(in, b) {
			return true
		}
	}
	return false
}

func contains(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// Package srtest runs Confluent's Python client as an independent reader
// of schema registry framed values, for tests: its deserializers read each
// value with the schema the registry gives its id.
//
// Imports (test support, for _test files and tools only): no other
// EventForge package.
package srtest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Request is one value to read.
type Request struct {
	Format     string `json:"format"` // avro, protobuf or json-schema
	Topic      string `json:"topic"`
	Value      []byte `json:"-"`
	Descriptor []byte `json:"-"` // protobuf: the serialized FileDescriptorProto of the message's file
}

// Result is what the reader made of a value.
type Result struct {
	ID    int             `json:"id"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// root is the repository's root directory.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Python returns the venv's python with Confluent's client, installing it
// on first use (deploy/local/schema-registry-venv.sh).
func Python(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root(), "deploy", "local", "schema-registry-venv.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("schema registry venv: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// Read reads every request with Confluent's deserializers against the
// registry at url, one result each in order.
func Read(t testing.TB, url string, reqs []Request) []Result {
	t.Helper()
	var in bytes.Buffer
	for _, r := range reqs {
		line := map[string]string{"format": r.Format, "topic": r.Topic, "value": base64.StdEncoding.EncodeToString(r.Value),
			"descriptor": base64.StdEncoding.EncodeToString(r.Descriptor)}
		b, _ := json.Marshal(line)
		in.Write(append(b, '\n'))
	}
	began := time.Now()
	cmd := exec.Command(Python(t), filepath.Join(root(), "internal", "shared", "schemareg", "testdata", "confluent_read.py"), url)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent reader: %v\n%s", err, stderr.String())
	}
	var res []Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("confluent reader output %q: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	if len(res) != len(reqs) {
		t.Fatalf("confluent reader: %d results for %d values\n%s", len(res), len(reqs), stderr.String())
	}
	t.Logf("Confluent's Python deserializers read %d values in %v", len(reqs), time.Since(began).Round(time.Millisecond))
	return res
}

// JSONEqual reports whether two JSON texts hold the same value (numbers
// compared as floats: Python reads 1.0 and 1 alike).
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/api"
	"github.com/eventforge/eventforge/cdc"
	"github.com/eventforge/eventforge/worker"
)

// TestFieldFlagNamesExist keeps the field-to-flag maps true: every field
// is a field of its library's Config and every flag is a flag of the
// command, so a renamed field or flag fails here rather than showing users
// a Go name.
func TestFieldFlagNamesExist(t *testing.T) {
	for _, tc := range []struct {
		cmd   []string
		cfg   any
		names map[string]string
	}{
		{[]string{"cdc", "run"}, cdc.Config{}, relayFlagNames()},
		{[]string{"worker", "run"}, worker.Config{}, workerFlagNames()},
		{[]string{"api", "run"}, api.Config{}, apiFlagNames()},
	} {
		cmd, _, err := newRootCmd().Find(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		typ := reflect.TypeOf(tc.cfg)
		for field, flag := range tc.names {
			if !hasField(typ, field) {
				t.Errorf("%s: %s is not a field of %s", strings.Join(tc.cmd, " "), field, typ)
			}
			if flag != "" && cmd.Flags().Lookup(strings.TrimPrefix(flag, "--")) == nil {
				t.Errorf("%s has no flag %s (for %s)", strings.Join(tc.cmd, " "), flag, field)
			}
		}
	}
}

// hasField reports whether path ("Config.Kafka.Brokers") names a field of
// typ, through nested structs and pointers to them.
func hasField(typ reflect.Type, path string) bool {
	rest, ok := strings.CutPrefix(path, "Config.")
	for _, name := range strings.Split(rest, ".") {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		f, has := typ.FieldByName(name)
		if !ok || !has {
			return false
		}
		typ = f.Type
	}
	return ok
}

// TestConfigErrorsNameFlags: the libraries' joined field errors reach the
// user with the flags' names, one per line.
func TestConfigErrorsNameFlags(t *testing.T) {
	c := worker.DefaultConfig()
	c.Kafka.Brokers, c.MaxBackoff, c.RetryBackoff = []string{"localhost:9092"}, 1, 2
	got := asFlags(c.Validate(), workerFlagNames()).Error()
	want := "--group: required\n--topics: required\n--max-backoff: 1ns is below --retry-backoff 2ns"
	if got != want {
		t.Errorf("worker errors:\n%s\nwant\n%s", got, want)
	}
	rc := cdc.DefaultConfig()
	rc.Slot, rc.TopicPartitions = "Bad", 0
	got = asFlags(rc.Validate(), relayFlagNames()).Error()
	for _, want := range []string{"--pg-url: required", "--kafka-brokers: required", `--slot: invalid slot name "Bad"`} {
		if !strings.Contains(got, want) {
			t.Errorf("relay errors:\n%s\nwant a line %q", got, want)
		}
	}
	if strings.Contains(got, "Config.") {
		t.Errorf("relay errors name a Go field:\n%s", got)
	}
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eventforge/eventforge/cdc"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/schemareg"
)

// TestWriterFlagsApply: --value-schema sets the mapping's encoder (after
// registering the given files); the flags it excludes or needs are refused.
func TestWriterFlagsApply(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("t.orders-value", 1, 1, sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object"}`})
	for _, c := range []struct {
		name    string
		flags   schemareg.Config
		mapping func(*outbox.Mapping)
		err     string
	}{
		{name: "none"},
		{name: "json-schema", flags: schemareg.Config{Format: "json-schema", URL: reg.URL(), SubjectStrategy: "topic"}},
		{name: "url alone", flags: schemareg.Config{URL: reg.URL()}, err: "need --value-schema"},
		{name: "no url", flags: schemareg.Config{Format: "avro", SubjectStrategy: "topic"}, err: "--schema-registry-url is required"},
		{name: "with a converter", flags: schemareg.Config{Format: "avro", URL: reg.URL()}, mapping: func(m *outbox.Mapping) { m.ValueConverter = "json" }, err: "exclude each other"},
		{name: "cloudevents", flags: schemareg.Config{Format: "avro", URL: reg.URL()}, mapping: func(m *outbox.Mapping) { m.Format = outbox.FormatCloudEvents }, err: "cloudevents"},
		{name: "missing file", flags: schemareg.Config{Format: "avro", URL: reg.URL(), SubjectStrategy: "topic", Register: []string{"s=/nonexistent.avsc"}}, err: "--register-schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := cdc.DefaultConfig()
			cfg.TopicPrefix = "t."
			if c.mapping != nil {
				c.mapping(&cfg.Mapping)
			}
			f := writerFlags{registryFlags{cfg: c.flags}}
			err := f.apply(context.Background(), &cfg, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (cfg.Mapping.ValueEncoder != nil) != (c.flags.Format != "") {
				t.Fatalf("encoder %v", cfg.Mapping.ValueEncoder)
			}
			if cfg.Mapping.ValueEncoder == nil {
				return
			}
			out, _, err := cfg.Mapping.ValueEncoder.AppendValue(nil, &outbox.Event{AggregateType: "orders", Payload: []byte(`{"a":1}`)})
			if id, _, ferr := schemareg.SplitFrame(out); err != nil || ferr != nil || id != 1 {
				t.Fatalf("encoded %x: %v %v", out, err, ferr)
			}
		})
	}
}

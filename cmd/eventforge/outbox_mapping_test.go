package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/cdc"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// runMappingProbe runs a command with the relay flags and returns the relay
// configuration they resolve to.
func runMappingProbe(t *testing.T, args ...string) (cdc.Config, error) {
	t.Helper()
	var (
		rf  relayFlags
		got cdc.Config
	)
	probe := &cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, _ []string) error {
		var err error
		got, err = rf.config(cmd)
		return err
	}}
	rf.register(probe)
	root := newRootCmd()
	root.AddCommand(probe)
	root.SetArgs(append([]string{"probe", "--pg-url", "postgres://localhost/db"}, args...))
	root.SetOut(&bytes.Buffer{})
	return got, root.Execute()
}

// TestMappingPrecedence: a flag (or its variable) beats the --outbox-config
// file, which beats the preset, which beats the contract's defaults.
func TestMappingPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "outbox.yaml")
	if err := os.WriteFile(file, []byte("preset: debezium\ntable: inventory.outbox\npayload: body\nextra_headers: [tenant]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		check  func(m outbox.Mapping, prefix string) bool
		detail string
	}{
		{"defaults", nil, nil, func(m outbox.Mapping, p string) bool {
			return m.EventID == "event_id" && m.Table == "public.outbox" && m.Headers == "headers" && m.Format == "eventforge" && p == ""
		}, "the contract's mapping, no prefix"},
		{"preset", nil, []string{"--outbox-preset", "debezium"}, func(m outbox.Mapping, p string) bool {
			return m.EventID == "id" && m.Topic == "aggregatetype" && m.Headers == "" && m.Format == "debezium" && p == "outbox.event."
		}, "Debezium's defaults and topic prefix"},
		{"file", nil, []string{"--outbox-config", file}, func(m outbox.Mapping, p string) bool {
			return m.EventID == "id" && m.Table == "inventory.outbox" && m.Payload == "body" && len(m.ExtraHeaders) == 1 && p == "outbox.event."
		}, "the file's settings over its preset"},
		{"flag beats file", nil, []string{"--outbox-config", file, "--outbox-column-payload", "data", "--outbox-table", "x.y", "--topic-prefix", "t."}, func(m outbox.Mapping, p string) bool {
			return m.Payload == "data" && m.Table == "x.y" && m.EventID == "id" && p == "t."
		}, "flags over the file"},
		{"env beats file", map[string]string{"EVENTFORGE_OUTBOX_COLUMN_PAYLOAD": "envdata", "EVENTFORGE_OUTBOX_PRESET": "eventforge"}, []string{"--outbox-config", file}, func(m outbox.Mapping, p string) bool {
			return m.Payload == "envdata" && m.EventID == "event_id" && m.Table == "inventory.outbox" && p == ""
		}, "variables over the file, preset too"},
		{"none clears", nil, []string{"--outbox-column-headers", "-", "--record-format", "cloudevents", "--cloudevents-source", "/s"}, func(m outbox.Mapping, p string) bool {
			return m.Headers == "" && m.Format == "cloudevents" && m.CloudEventsSource == "/s"
		}, "headers off, CloudEvents"},
		{"converters", map[string]string{"EVENTFORGE_VALUE_CONVERTER": "json-schemas", "EVENTFORGE_DEBEZIUM_LOGICAL_NAME": "dbserver1"},
			[]string{"--outbox-preset", "debezium", "--key-converter", "json", "--debezium-connector-name", "pg"}, func(m outbox.Mapping, p string) bool {
				return m.ValueConverter == "json-schemas" && m.KeyConverter == "json" && m.DebeziumLogicalName == "dbserver1" && m.DebeziumConnectorName == "pg"
			}, "the converters and context headers from flags and variables"},
		{"debezium value is the text", nil, []string{"--outbox-preset", "debezium"}, func(m outbox.Mapping, p string) bool {
			return m.ValueConverter == "" && m.EffectiveValueConverter() == "string"
		}, "the debezium format writes PostgreSQL's text (string converter)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := runMappingProbe(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg.Mapping, cfg.TopicPrefix) {
				t.Fatalf("want %s; got %+v prefix %q", tc.detail, cfg.Mapping, cfg.TopicPrefix)
			}
			if cfg.OutboxTable != cfg.Mapping.Table {
				t.Fatalf("OutboxTable %q, mapping table %q", cfg.OutboxTable, cfg.Mapping.Table)
			}
		})
	}
}

func TestMappingFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--outbox-preset", "kafka"}, `invalid --outbox-preset "kafka"`},
		{[]string{"--record-format", "avro", "--outbox-column-key", "aggregate_type"}, `invalid --record-format "avro"`},
		{[]string{"--outbox-config", "/nonexistent.yaml"}, "read outbox config"},
		{[]string{"--value-converter", "avro"}, `invalid --value-converter "avro"`},
		{[]string{"--key-converter", "string-schemas"}, `invalid --key-converter "string-schemas"`},
		{[]string{"--debezium-logical-name", "dbserver1"}, "only the debezium record format"},
	} {
		_, err := runMappingProbe(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
	// Every problem at once.
	_, err := runMappingProbe(t, "--record-format", "avro", "--outbox-column-key", "aggregate_type")
	if err == nil || !strings.Contains(err.Error(), "mapped twice") {
		t.Errorf("want both problems, got %v", err)
	}
}

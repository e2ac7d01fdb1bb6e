package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/cdc"
)

func TestBackfillFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags backfillFlags
		since time.Time
		all   bool
		err   string
	}{
		{"none", backfillFlags{}, time.Time{}, false, ""},
		{"since", backfillFlags{since: "2026-12-01T10:00:00Z"}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), false, ""},
		{"since a date", backfillFlags{since: "2026-12-01"}, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), false, ""},
		{"all", backfillFlags{all: true}, time.Time{}, true, ""},
		{"both", backfillFlags{since: "2026-12-01", all: true}, time.Time{}, false, "exclude each other"},
		{"bad time", backfillFlags{since: "yesterday"}, time.Time{}, false, `invalid --backfill-since "yesterday"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cdc.DefaultConfig()
			err := tc.flags.apply(&cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("apply = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !cfg.BackfillSince.Equal(tc.since) || cfg.BackfillAll != tc.all {
				t.Fatalf("apply = %v, since %v all %v; want since %v all %v", err, cfg.BackfillSince, cfg.BackfillAll, tc.since, tc.all)
			}
		})
	}
}

// TestBackfillFlagsFromEnvironment: EVENTFORGE_BACKFILL_SINCE and
// EVENTFORGE_BACKFILL_ALL are the flags' twins.
func TestBackfillFlagsFromEnvironment(t *testing.T) {
	t.Setenv("EVENTFORGE_BACKFILL_SINCE", "2026-12-01T10:00:00Z")
	var cfg cdc.Config
	var b backfillFlags
	probe := &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return b.apply(&cfg) }}
	b.register(probe)
	root := newRootCmd()
	root.AddCommand(probe)
	root.SetArgs([]string{"probe"})
	root.SetOut(&bytes.Buffer{})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !cfg.BackfillSince.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("BackfillSince = %v", cfg.BackfillSince)
	}
	t.Setenv("EVENTFORGE_BACKFILL_ALL", "true")
	root = newRootCmd()
	b = backfillFlags{}
	probe = &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return b.apply(&cfg) }}
	b.register(probe)
	root.AddCommand(probe)
	root.SetArgs([]string{"probe"})
	root.SetOut(&bytes.Buffer{})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("both variables: %v, want a refusal", err)
	}
}

// TestCDCRunRefusesBothBackfillFlags: a configuration error, before any
// connection.
func TestCDCRunRefusesBothBackfillFlags(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"cdc", "run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1",
		"--backfill-since", "2026-12-01", "--backfill-all"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--backfill-since and --backfill-all exclude each other") {
		t.Fatalf("cdc run with both = %v", err)
	}
}

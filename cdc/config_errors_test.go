package cdc

import (
	"strings"
	"testing"
)

// TestValidateReportsEveryProblem: Validate names every field at fault at
// once, one per line, and never the password.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.PGURL = "postgres://u:secret@[::1"
	c.Slot, c.Compression, c.MaxInFlightEvents = "Bad-Slot", "rar", -1
	c.BackfillAll, c.BackfillSince = true, c.BackfillSince.AddDate(2026, 0, 0)
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	want := []string{"Config.PGURL: invalid PostgreSQL URL", "Config.Kafka.Brokers: required", `Config.Slot: invalid slot name "Bad-Slot"`,
		"Config.BackfillAll and Config.BackfillSince exclude each other", "Config.MaxInFlightEvents: -1", `Config.Compression: invalid compression "rar"`}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() =\n%v\nwant a line %q", err, w)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("Validate() has %d lines, want %d:\n%v", n, len(want), err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("Validate() shows the password: %v", err)
	}
}

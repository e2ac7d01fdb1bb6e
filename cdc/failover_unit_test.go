package cdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/slots"
)

func TestWantFailover(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		version int
		want    bool
		fatal   bool
	}{
		{SlotFailoverAuto, 150013, false, false},
		{SlotFailoverAuto, 160009, false, false},
		{SlotFailoverAuto, 170005, true, false},
		{SlotFailoverAuto, 180000, true, false},
		{SlotFailoverOn, 170000, true, false},
		{SlotFailoverOn, 160009, false, true},
		{SlotFailoverOff, 170005, false, false},
		{SlotFailoverOff, 150013, false, false},
	} {
		got, err := wantFailover(tc.mode, tc.version)
		var fe *FatalError
		if got != tc.want || (err != nil) != tc.fatal || (err != nil && (!errors.As(err, &fe) || !errors.Is(err, ErrFailoverUnsupported))) {
			t.Errorf("wantFailover(%s, %d) = %v, %v; want %v, fatal %v", tc.mode, tc.version, got, err, tc.want, tc.fatal)
		}
	}
}

func TestSlotCommands(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{createSlotCommand("s1", true), "CREATE_REPLICATION_SLOT s1 LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)"},
		{createSlotCommand("s1", false), "CREATE_REPLICATION_SLOT s1 LOGICAL pgoutput EXPORT_SNAPSHOT"},
		{alterSlotCommand("s1"), "ALTER_REPLICATION_SLOT s1 (FAILOVER true)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestFailoverConfig(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil || c.withDefaults().SlotFailover != SlotFailoverAuto {
		t.Fatalf("default: %v, %q", err, c.withDefaults().SlotFailover)
	}
	c.SlotFailover, c.StandbyURL = "always", "postgres://u@h:5432/db?sslmode=nonsense"
	err := c.Validate()
	for _, want := range []string{`Config.SlotFailover: "always": want auto, on or off`, "Config.StandbyURL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
}

// TestSayProtection: the log says a reading once, and warns when a standby
// streams from a server whose slot a promotion would lose.
func TestSayProtection(t *testing.T) {
	log, logs := logBuffer(t)
	r := &Relay{cfg: validConfig(), log: log}
	var w protectionWatch
	unprotected := slots.Protection{Slot: "s", ServerVersion: 170005, Standbys: 1}
	protected := slots.Protection{Slot: "s", ServerVersion: 170005, Failover: true, StandbySlots: []string{"sb1"}, Standbys: 1}
	for _, p := range []slots.Protection{unprotected, unprotected, protected, protected, unprotected} {
		r.sayProtection(p, &w)
	}
	out := logs.String()
	if n := strings.Count(out, "1 standby streams from this server, but a promotion would lose slot"); n != 2 {
		t.Errorf("%d warnings, want 2 (one per change):\n%s", n, out)
	}
	if n := strings.Count(out, "the slot is protected"); n != 1 {
		t.Errorf("%d lines say protected, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "not a failover slot") || !strings.Contains(out, "synchronized_standby_slots is empty") {
		t.Errorf("the warning does not say why:\n%s", out)
	}
}

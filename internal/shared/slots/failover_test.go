package slots

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestProtectionProblems(t *testing.T) {
	ok := Protection{Slot: "s", ServerVersion: 170005, Failover: true, StandbySlots: []string{"sb1"}}
	with := func(f func(*Protection)) Protection { p := ok; f(&p); return p }
	for _, tc := range []struct {
		name string
		p    Protection
		want []string // parts of the problems; none: ready
	}{
		{"protected", ok, nil},
		{"protected, standby synced", with(func(p *Protection) { p.StandbyChecked, p.StandbyHasSlot, p.Synced = true, true, true }), nil},
		{"PostgreSQL 16", with(func(p *Protection) { p.ServerVersion = 160009 }), []string{"PostgreSQL 16 has no failover slots"}},
		{"not a failover slot", with(func(p *Protection) { p.Failover = false }), []string{"not a failover slot"}},
		{"no standby slots", with(func(p *Protection) { p.StandbySlots = nil }), []string{"synchronized_standby_slots is empty"}},
		{"inactive standby slot", with(func(p *Protection) { p.InactiveStandbySlots = []string{"sb1"} }), []string{"names sb1, which no standby streams from"}},
		{"standby lacks the slot", with(func(p *Protection) { p.StandbyChecked = true }), []string{"the standby has no copy"}},
		{"standby copy temporary", with(func(p *Protection) {
			p.StandbyChecked, p.StandbyHasSlot, p.Synced, p.Temporary = true, true, true, true
		}),
			[]string{"not synced yet (synced true, temporary true)"}},
	} {
		got := tc.p.Problems()
		if tc.p.Ready() != (len(tc.want) == 0) {
			t.Errorf("%s: Ready = %v with problems %q", tc.name, tc.p.Ready(), got)
		}
		for _, w := range tc.want {
			if !strings.Contains(strings.Join(got, "; "), w) {
				t.Errorf("%s: problems %q lack %q", tc.name, got, w)
			}
		}
	}
}

func TestParseSlotList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                  {},
		"sb1":               {"sb1"},
		` sb1 , "sb2",,sb3`: {"sb1", "sb2", "sb3"},
	} {
		if got := ParseSlotList(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseSlotList(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRecoverFrom(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := at.Add(-3 * time.Second)
	if got := (RelayRecord{UpdatedAt: at, RecoverSince: &since}).RecoverFrom(); !got.Equal(since) {
		t.Errorf("with recover_since: %s, want %s", got, since)
	}
	if got := (RelayRecord{UpdatedAt: at}).RecoverFrom(); !got.Equal(at.Add(-time.Hour)) {
		t.Errorf("without recover_since: %s, want an hour before %s", got, at)
	}
}

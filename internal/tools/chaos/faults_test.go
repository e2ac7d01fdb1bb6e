package chaos

import (
	"strings"
	"testing"
)

// TestSchedule: the faults of a configuration, each with a share.
func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want []string
	}{
		{"default", func(*Config) {}, []string{"relay kill", "worker kills", "broker restart", "broker freeze", "promotion", "PostgreSQL restart"}},
		{"no promotions", func(c *Config) { c.Promotions = false }, []string{"relay kill", "worker kills", "broker restart", "broker freeze", "PostgreSQL restart"}},
		{"no broker faults", func(c *Config) { c.NoBrokerRestarts = true }, []string{"relay kill", "worker kills", "promotion", "PostgreSQL restart"}},
		{"neither", func(c *Config) { c.NoBrokerRestarts, c.Promotions = true, false }, []string{"relay kill", "worker kills", "PostgreSQL restart"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.cfg(&cfg)
			var got []string
			total := 0
			for _, f := range (&faulter{run: &run{cfg: cfg}}).schedule() {
				if f.weight <= 0 || f.inject == nil {
					t.Errorf("%s: weight %d", f.name, f.weight)
				}
				got = append(got, f.name)
				total += f.weight
			}
			if total != 100 {
				t.Errorf("weights add up to %d, want 100 (the share of a fault left out goes to PostgreSQL restarts)", total)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("schedule %v, want %v", got, tc.want)
			}
		})
	}
}

// TestConfigResolved: promotions run on PostgreSQL 17 unless told another
// version, and refuse one without failover slots.
func TestConfigResolved(t *testing.T) {
	base := DefaultConfig()
	base.Bin, base.Root, base.StateDir = "bin", "root", "state"
	for _, tc := range []struct {
		promotions bool
		version    string
		want       string // resolved version, or "error"
	}{
		{true, "", "17"},
		{true, "18", "18"},
		{true, "16", "error"},
		{false, "", ""},
		{false, "16", "16"},
	} {
		cfg := base
		cfg.Promotions, cfg.PGVersion = tc.promotions, tc.version
		got, err := cfg.resolved()
		switch {
		case tc.want == "error" && err == nil:
			t.Errorf("promotions on %q accepted", tc.version)
		case tc.want != "error" && (err != nil || got.PGVersion != tc.want || got.Seed == 0 || got.Report == ""):
			t.Errorf("promotions %v, version %q: %+v, %v; want version %q, a seed and a report path", tc.promotions, tc.version, got, err, tc.want)
		}
	}
}

func TestStandbyName(t *testing.T) {
	for in, want := range map[string]string{"/x/pg.standby": "pg_standby", "/x/pg-17": "pg_17", "/x/pg": "pg"} {
		if got := standbyName(in); got != want {
			t.Errorf("standbyName(%s) = %s, want %s", in, got, want)
		}
	}
}

package bench

import "testing"

func TestParseStatCPU(t *testing.T) {
	// Field 2 may hold spaces and parentheses; utime=250, stime=50 ticks.
	stat := "4242 (event forge) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 100 123456 789 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3.0 {
		t.Fatalf("parseStatCPU = %v, %v; want 3.0", got, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\teventforge\nVmPeak:\t  900000 kB\nVmHWM:\t   61440 kB\nVmRSS:\t   50000 kB\n"
	if got, err := parseStatusKB(status, "VmHWM"); err != nil || got != 61440 {
		t.Fatalf("VmHWM = %v, %v", got, err)
	}
	if _, err := parseStatusKB(status, "VmSwap"); err == nil {
		t.Fatal("missing key parsed")
	}
}

func TestParsePprofFlag(t *testing.T) {
	for _, tc := range []struct {
		name, help string
		ok         bool
		want       pprofFlag
	}{
		{"none", "Flags:\n      --metrics-addr string   address\n", false, pprofFlag{}},
		{"bool", "Flags:\n      --pprof                      serve /debug/pprof on --metrics-addr\n", true, pprofFlag{name: "--pprof"}},
		{"address", "Flags:\n      --pprof-addr string   serve /debug/pprof here\n", true, pprofFlag{name: "--pprof-addr", takesArg: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parsePprofFlag(tc.help)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parsePprofFlag = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestWithDatabase(t *testing.T) {
	got, err := withDatabase("postgres://u:secret@127.0.0.1:5432/eventforge?sslmode=disable", "bench_1")
	if err != nil || got != "postgres://u:secret@127.0.0.1:5432/bench_1?sslmode=disable" {
		t.Fatalf("withDatabase = %q, %v", got, err)
	}
	if _, err := withDatabase("host=x dbname=y", "z"); err == nil {
		t.Fatal("a keyword/value string is not a URL")
	}
}

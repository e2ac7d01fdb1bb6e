package bench

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

// drainRun is run i of n of the single-row drain at rate events/s.
func drainRun(i, n int, rate, cpu float64) Row {
	return Row{Stage: StageDrain, Shape: ShapeSingle, Events: 100000, Run: i, Runs: n, EventsPerSec: rate,
		Seconds: 100000 / rate, RecvLogicalPerSec: f64(60000), Ratio: f64(rate / 60000), CPUPerM: f64(cpu),
		RecvLogicalCPUPerM: f64(2), PeakRSSMB: f64(40), RecordsPerRequest: f64(rate / 1000)}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		runs                  []Row
		median, lo, hi        float64
		cpuMedian, cpuLo, cpu float64
		outliers              []int // runs flagged
		failed                int
	}{
		{
			name:   "the outlier of the investigation",
			runs:   []Row{drainRun(1, 3, 38000, 9), drainRun(2, 3, 5500, 122), drainRun(3, 3, 54000, 8)},
			median: 38000, lo: 5500, hi: 54000, cpuMedian: 9, cpuLo: 8, cpu: 122, outliers: []int{2},
		},
		{
			name:   "even count: mean of the middle two, none below half",
			runs:   []Row{drainRun(1, 4, 40000, 10), drainRun(2, 4, 30000, 12), drainRun(3, 4, 50000, 8), drainRun(4, 4, 20000, 14)},
			median: 35000, lo: 20000, hi: 50000, cpuMedian: 11, cpuLo: 8, cpu: 14,
		},
		{
			name: "a failed run is left out",
			runs: []Row{drainRun(1, 3, 40000, 10), {Stage: StageDrain, Shape: ShapeSingle, Run: 2, Runs: 3, Error: "boom"},
				drainRun(3, 3, 44000, 12)},
			median: 42000, lo: 40000, hi: 44000, cpuMedian: 11, cpuLo: 10, cpu: 12, failed: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := summarize(tc.runs)
			sp := sum.Summary
			if sp == nil || sum.Run != 0 || sum.Runs != len(tc.runs) || sum.Error != "" {
				t.Fatalf("summary row = %+v", sum)
			}
			if sum.EventsPerSec != tc.median || sp.EventsPerSecMin != tc.lo || sp.EventsPerSecMax != tc.hi {
				t.Errorf("events/s median %v min %v max %v, want %v %v %v", sum.EventsPerSec, sp.EventsPerSecMin, sp.EventsPerSecMax, tc.median, tc.lo, tc.hi)
			}
			if *sum.CPUPerM != tc.cpuMedian || *sp.CPUPerMMin != tc.cpuLo || *sp.CPUPerMMax != tc.cpu {
				t.Errorf("CPU s/M median %v min %v max %v, want %v %v %v", *sum.CPUPerM, *sp.CPUPerMMin, *sp.CPUPerMMax, tc.cpuMedian, tc.cpuLo, tc.cpu)
			}
			if *sum.RecvLogicalCPUPerM != 2 || !near(*sum.RecordsPerRequest, tc.median/1000) || !near(*sum.Ratio, tc.median/60000) {
				t.Errorf("medians of the other figures: %+v", sum)
			}
			var flagged []int
			for _, r := range tc.runs {
				if r.Outlier {
					flagged = append(flagged, r.Run)
				}
			}
			if sp.Outliers != len(tc.outliers) || !slices.Equal(flagged, tc.outliers) || sp.Failed != tc.failed || sp.Runs != len(tc.runs)-tc.failed {
				t.Errorf("outliers %d flagged %v failed %d runs %d, want %v and %d failed", sp.Outliers, flagged, sp.Failed, sp.Runs, tc.outliers, tc.failed)
			}
			if (sp.Outliers > 0) != strings.HasPrefix(sum.Note, "OUTLIERS: ") {
				t.Errorf("note %q with %d outliers", sum.Note, sp.Outliers)
			}
		})
	}
	all := summarize([]Row{{Stage: StageDrain, Shape: ShapeBulk, Run: 1, Runs: 2, Error: "x"}, {Stage: StageDrain, Shape: ShapeBulk, Run: 2, Runs: 2, Error: "y"}})
	if all.Error == "" || all.Summary.Failed != 2 {
		t.Errorf("every run failed, yet the summary is %+v", all)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// TestEvaluateRepeatedDrainUsesMedian: with several runs, the targets read
// the summary row, not the first run.
func TestEvaluateRepeatedDrainUsesMedian(t *testing.T) {
	runs := []Row{drainRun(1, 3, 5500, 122), drainRun(2, 3, 54000, 4), drainRun(3, 3, 50000, 4.5)}
	rows := append(runs, summarize(runs))
	for _, tg := range Evaluate(rows) {
		if tg.Name == "drain single-row txns: relay CPU per million events" && (tg.Measured != "4.5 s" || tg.Status != "PASS") {
			t.Errorf("CPU target on the median 4.5 s: %+v", tg)
		}
		if tg.Name == "drain single-row txns: relay / pg_recvlogical" && tg.Measured != "0.83" {
			t.Errorf("ratio target on the median 50000/60000: %+v", tg)
		}
	}
}

func TestParseShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{DefaultShapes, "bulk,single", false},
		{" single ", "single", false},
		{"single,bulk,single", "single,bulk", false},
		{"", "", true},
		{"bulk,1000", "", true},
		{"bulk:1,bulk:10,bulk", "bulk:1,bulk:10,bulk", false},
		{"bulk:0", "", true},
		{"single:3", "", true},
	} {
		got, err := ParseShapes(tc.in)
		if (err != nil) != tc.err || strings.Join(got, ",") != tc.want {
			t.Errorf("ParseShapes(%q) = %v, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestValidateCollectsEveryError: every problem is reported at once, and a
// valid configuration gets its defaults.
func TestValidateCollectsEveryError(t *testing.T) {
	bad := Config{Repeat: -1, Shapes: []string{"huge"}}
	err := bad.Validate()
	for _, want := range []string{"no PostgreSQL URL", "no Kafka brokers", "no eventforge binary", "--events", "--steady-duration",
		"--repeat must be positive", "no stages selected", "--json-out", `unknown shape "huge"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	good := Config{PGURL: "postgres://x", Brokers: []string{"b:9092"}, Binary: "eventforge", Stages: []string{StageDrain},
		Events: 1, WorkerEvents: 1, WorkerSingleEvents: 1, SteadyDuration: 1, Writers: 1, StatusInterval: 1, JSONOut: "r.json"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if good.Repeat != 1 || strings.Join(good.Shapes, ",") != DefaultShapes || len(good.Modes) != 1 {
		t.Errorf("defaults: repeat %d shapes %v modes %v", good.Repeat, good.Shapes, good.Modes)
	}
	if good.Out == nil || good.Log == nil {
		t.Error("no default output or logger")
	}
}

// TestWriteTableRepeats: each run has its own labelled row, outliers are
// flagged, and the new columns show pg_recvlogical's CPU and the records
// per request.
func TestWriteTableRepeats(t *testing.T) {
	runs := []Row{drainRun(1, 3, 38000, 9), drainRun(2, 3, 5500, 122), drainRun(3, 3, 54000, 8)}
	rep := &Report{Results: append(runs, summarize(runs))}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "PG_RECVLOGICAL CPU S/M") || !strings.Contains(lines[0], "REC/REQ") {
		t.Fatalf("header: %q", lines[0])
	}
	for i, want := range []string{"single-row txns, run 1/3", "single-row txns, run 2/3", "single-row txns, run 3/3", "single-row txns, median of 3"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d lacks %q: %q", i+1, want, lines[i+1])
		}
	}
	if !strings.Contains(lines[2], "OUTLIER: below half the median") || strings.Contains(lines[1], "OUTLIER") {
		t.Errorf("outlier flags:\n%s", b.String())
	}
	if !strings.Contains(lines[4], "OUTLIERS: 1 run below half the median events/s; median of 3 runs; events/s 5500 to 54000; CPU s/M 8.0 to 122.0") {
		t.Errorf("summary note: %q", lines[4])
	}
	if !strings.Contains(lines[2], " 122.0 ") || !strings.Contains(lines[2], " 2.0 ") || !strings.Contains(lines[2], " 5.5 ") {
		t.Errorf("CPU, pg_recvlogical CPU and records per request of run 2: %q", lines[2])
	}
}

package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleRows() []Row {
	return []Row{
		{Stage: StageDrain, Shape: ShapeBulk, Events: 1000000, Seconds: 16, EventsPerSec: 62500,
			RecvLogicalRan: true, RecvLogicalPerSec: f64(75000), Ratio: f64(62500.0 / 75000), CPUPerM: f64(4.2), PeakRSSMB: f64(61)},
		{Stage: StageDrain, Shape: ShapeSingle, Events: 1000000, Seconds: 50, EventsPerSec: 20000,
			RecvLogicalRan: true, RecvLogicalPerSec: f64(29000), Ratio: f64(20000.0 / 29000), CPUPerM: f64(7), PeakRSSMB: f64(40)},
		{Stage: StageSteady, Shape: "5000/s single-row txns", Events: 300000, Seconds: 60, EventsPerSec: 5000,
			TargetPerSec: f64(5000), P50Ms: f64(3.1), P99Ms: f64(8.5), P999Ms: f64(14), MaxSlotLag: i64(3 << 20)},
		{Stage: StageSteady, Shape: "10000/s single-row txns", Events: 420000, Seconds: 60, EventsPerSec: 7000,
			TargetPerSec: f64(10000), WriterShort: true, P99Ms: f64(30)},
		{Stage: StageWorker, Shape: ModeBatch, Error: "boom"},
	}
}

func TestEvaluateTargets(t *testing.T) {
	got := map[string]Target{}
	for _, tg := range Evaluate(sampleRows()) {
		got[tg.Name] = tg
	}
	for _, tc := range []struct{ name, status, measured string }{
		{"drain 1000-row txns: relay / pg_recvlogical", "PASS", "0.83"},
		{"drain 1000-row txns: relay CPU per million events", "PASS", "4.2 s"},
		{"drain 1000-row txns: relay peak RSS", "PASS", "61 MB"},
		{"drain single-row txns: relay / pg_recvlogical", "MISS", "0.69"},
		{"drain single-row txns: relay CPU per million events", "MISS", "7.0 s"},
		{"steady 5,000 events/s: commit-to-ack p99", "PASS", "8.50 ms"},
		{"worker batch mode: apply rate", "n/a", "-"}, // its row failed: never a PASS
	} {
		tg, ok := got[tc.name]
		if !ok {
			t.Errorf("no target %q in %v", tc.name, got)
			continue
		}
		if tg.Status != tc.status || tg.Measured != tc.measured {
			t.Errorf("%s: %s %s, want %s %s", tc.name, tg.Status, tg.Measured, tc.status, tc.measured)
		}
	}
	// A p99 measured below the target rate is neither a pass nor a miss.
	short := sampleRows()
	short[2].WriterShort, short[2].EventsPerSec = true, 1800
	for _, tg := range Evaluate(short) {
		if strings.HasPrefix(tg.Name, "steady") && (tg.Status != "n/a" || !strings.Contains(tg.Measured, "1800 events/s")) {
			t.Errorf("writer short: %+v", tg)
		}
	}
	// ...unless the same event rate was reached in larger transactions.
	withMulti := append(short, Row{Stage: StageSteady, Shape: "5000/s in 10-row txns", Events: 300000, Seconds: 60,
		EventsPerSec: 5000, TargetPerSec: f64(5000), P50Ms: f64(4), P99Ms: f64(12.5)})
	for _, tg := range Evaluate(withMulti) {
		if strings.HasPrefix(tg.Name, "steady") && (tg.Status != "MISS" || tg.Measured != "12.50 ms (5000/s in 10-row txns)") {
			t.Errorf("writer short, 10-row row reached the rate: %+v", tg)
		}
	}
	for _, tg := range Evaluate(nil) {
		if tg.Status != "n/a" {
			t.Errorf("no results but %s is %s", tg.Name, tg.Status)
		}
	}
}

func TestWriteTable(t *testing.T) {
	rep := &Report{Results: sampleRows()}
	rep.Targets = Evaluate(rep.Results)
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "PG_RECVLOGICAL EV/S") || !strings.Contains(lines[0], "P99.9 MS") {
		t.Fatalf("header: %q", lines[0])
	}
	for _, want := range []string{
		"62500", "75000", "0.83", // drain rates and ratio
		"8.50", "14.00", "3.0 MiB", // latency and lag
		"WRITER SHORT of target", "ERROR: boom",
		"PASS  drain 1000-row txns: relay / pg_recvlogical", "MISS  drain single-row txns",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "WARNING") {
		t.Errorf("warning without load:\n%s", out)
	}
	rep.Machine.NumCPU = 2
	rep.Results[0].LoadAvg = 7.5
	b.Reset()
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "WARNING: the machine was busy (1-minute load average up to 7.5 on 2 CPUs)") {
		t.Errorf("no busy warning:\n%s", b.String())
	}
	// Missing figures print as "-", not as zeros.
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "worker") && !strings.Contains(l, " - ") {
			t.Errorf("worker row without dashes: %q", l)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	rep := &Report{Date: time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), Command: "eventforge bench --events 10",
		Machine: Machine{NumCPU: 2, PostgreSQL: "15.18", Kafka: "4.1.1"}, Results: sampleRows()}
	rep.Targets = Evaluate(rep.Results)
	path := filepath.Join(t.TempDir(), "sub", "results.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	results := back["results"].([]any)
	first := results[0].(map[string]any)
	if first["events_per_sec"].(float64) != 62500 || first["pg_recvlogical_events_per_sec"].(float64) != 75000 || first["pg_recvlogical_ran"] != true {
		t.Errorf("first row = %v", first)
	}
	if _, ok := first["p99_ms"]; ok {
		t.Errorf("drain row has a latency: %v", first)
	}
	if back["machine"].(map[string]any)["nproc"].(float64) != 2 || back["command"] != rep.Command {
		t.Errorf("machine/command = %v / %v", back["machine"], back["command"])
	}
	if len(back["targets"].([]any)) != len(rep.Targets) {
		t.Errorf("targets = %v", back["targets"])
	}
}

func TestF64DropsNaN(t *testing.T) {
	if f64(0/zero()) != nil || f64(1) == nil {
		t.Fatal("f64 must drop NaN and keep numbers")
	}
}

func zero() float64 { return 0 }

// TestEvaluateExactlyOnce: the exactly-once targets compare the
// exactly-once rows with the at-least-once rows of the same shape, and the
// at-least-once targets ignore the exactly-once rows.
func TestEvaluateExactlyOnce(t *testing.T) {
	p99 := func(v float64) *float64 { return &v }
	rows := []Row{
		{Stage: StageDrain, Shape: ShapeBulk + ", exactly-once", Mode: DeliveryExactlyOnce, EventsPerSec: 600, Ratio: p99(0.1)},
		{Stage: StageDrain, Shape: ShapeBulk, EventsPerSec: 1000, Ratio: p99(0.9)},
		{Stage: StageSteady, Shape: "1000/s single-row txns", P99Ms: p99(10)},
		{Stage: StageSteady, Shape: "1000/s single-row txns, exactly-once", Mode: DeliveryExactlyOnce, P99Ms: p99(15)},
	}
	got := map[string]Target{}
	for _, tg := range Evaluate(rows) {
		got[tg.Name] = tg
	}
	want := map[string]string{
		"drain " + ShapeBulk + ": relay / pg_recvlogical":             "0.90 PASS",
		"exactly-once drain " + ShapeBulk + ": / at-least-once":       "0.60 MISS",
		"exactly-once steady 1,000 events/s: p99 / at-least-once p99": "1.50 PASS",
	}
	for name, w := range want {
		tg, ok := got[name]
		if !ok || tg.Measured+" "+tg.Status != w {
			t.Errorf("%s: %+v, want %s", name, tg, w)
		}
	}
}

// TestEvaluateAvro: the Avro drain is judged against the JSON drain of the
// same run, and never stands in for the JSON rows of the other targets.
func TestEvaluateAvro(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name string
		rows []Row
		want string
	}{
		{"pass", []Row{
			{Stage: StageDrain, Shape: ShapeBulk + ", avro values", ValueSchema: "avro", EventsPerSec: 850, Ratio: f(0.2)},
			{Stage: StageDrain, Shape: ShapeBulk, EventsPerSec: 1000, Ratio: f(0.9)},
		}, "0.85 PASS"},
		{"miss", []Row{
			{Stage: StageDrain, Shape: ShapeBulk, EventsPerSec: 1000, Ratio: f(0.9)},
			{Stage: StageDrain, Shape: ShapeBulk + ", avro values", ValueSchema: "avro", EventsPerSec: 700},
		}, "0.70 MISS"},
		{"no avro run", []Row{{Stage: StageDrain, Shape: ShapeBulk, EventsPerSec: 1000, Ratio: f(0.9)}}, "- n/a"},
	} {
		got := map[string]Target{}
		for _, tg := range Evaluate(c.rows) {
			got[tg.Name] = tg
		}
		if tg := got["avro drain "+ShapeBulk+": / JSON drain"]; tg.Measured+" "+tg.Status != c.want {
			t.Errorf("%s: %+v, want %s", c.name, tg, c.want)
		}
		if tg := got["drain "+ShapeBulk+": relay / pg_recvlogical"]; tg.Measured != "0.90" {
			t.Errorf("%s: the JSON drain's target took %s", c.name, tg.Measured)
		}
	}
}

package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// latencyHist is a histogram delta with bounds of 1, 5, 10, 50 ms and +Inf
// holding counts samples in each bucket.
func latencyHist(counts ...uint64) Histogram {
	h := Histogram{Bounds: []float64{0.001, 0.005, 0.01, 0.05, math.Inf(1)}}
	var cum uint64
	for _, c := range counts {
		cum += c
		h.Cum = append(h.Cum, cum)
	}
	h.Count = cum
	return h
}

func TestHistogramAdd(t *testing.T) {
	a, b := latencyHist(1, 2, 3, 4, 0), latencyHist(10, 0, 0, 0, 1)
	got := a.Add(b)
	want := latencyHist(11, 2, 3, 4, 1)
	if got.Count != want.Count || !slices.Equal(got.Cum, want.Cum) {
		t.Fatalf("Add = %+v, want %+v", got, want)
	}
	if e := (Histogram{}).Add(a); !slices.Equal(e.Cum, a.Cum) {
		t.Fatalf("empty.Add(a) = %+v", e)
	}
	if e := a.Add(Histogram{}); !slices.Equal(e.Cum, a.Cum) {
		t.Fatalf("a.Add(empty) = %+v", e)
	}
}

// steadyRun is round i of n of the 1000/s rate in mode with 1,000 samples
// spread as counts over latencyHist's buckets.
func steadyRun(i, n int, mode string, p99 float64, counts ...uint64) Row {
	h := latencyHist(counts...)
	shape := "1000/s single-row txns"
	if mode != "" {
		shape += ", " + mode
	}
	return Row{Stage: StageSteady, Shape: shape, Mode: mode, Run: i, Runs: n, Events: int64(h.Count), Seconds: 1,
		EventsPerSec: float64(h.Count), TargetPerSec: f64(1000), P99Ms: f64(p99), CPUPerM: f64(float64(100 * i)),
		MaxSlotLag: i64(int64(1000 * i)), latency: h, server: latencyHist(counts[0], 0, 0, 0, 0)}
}

// TestSummarizeSteady: one summary per mode and rate, in the order they
// ran; the latency quantiles are those of the pooled samples, not a median
// of the runs' p99s: one run's stall shows in the pooled p99 only as far as
// its share of all samples reaches.
func TestSummarizeSteady(t *testing.T) {
	runs := []Row{
		steadyRun(1, 3, "", 4, 990, 10, 0, 0, 0),
		steadyRun(1, 3, DeliveryExactlyOnce, 9, 0, 985, 10, 5, 0),
		steadyRun(2, 3, "", 40, 960, 10, 0, 30, 0), // a stalled run
		steadyRun(2, 3, DeliveryExactlyOnce, 9, 0, 985, 10, 5, 0),
		steadyRun(3, 3, "", 4, 990, 10, 0, 0, 0),
		{Stage: StageSteady, Shape: "1000/s single-row txns, " + DeliveryExactlyOnce, Mode: DeliveryExactlyOnce, Run: 3, Runs: 3, Error: "boom"},
	}
	sums := summarizeSteady(runs)
	if len(sums) != 2 || sums[0].Mode != "" || sums[1].Mode != DeliveryExactlyOnce {
		t.Fatalf("summaries %+v: want at-least-once then exactly-once", sums)
	}
	alo, eos := sums[0], sums[1]
	if alo.Events != 3000 || alo.Seconds != 3 || alo.EventsPerSec != 1000 || *alo.LatencyCount != 3000 {
		t.Errorf("at-least-once totals: %d events in %v s, %v/s, %d samples", alo.Events, alo.Seconds, alo.EventsPerSec, *alo.LatencyCount)
	}
	// 2,940 of 3,000 samples are under 1 ms and 30 in 1-5 ms: the pooled p99
	// (rank 2,970) is in the 1-5 ms bucket, where the stalled run's own p99
	// was 40 ms.
	if p := *alo.P99Ms; p <= 1 || p > 5 {
		t.Errorf("pooled p99 %.2f ms: want within the 1-5 ms bucket", p)
	}
	if *alo.Summary.P99MsMin != 4 || *alo.Summary.P99MsMax != 40 || *alo.MaxSlotLag != 3000 || *alo.CPUPerM != 200 {
		t.Errorf("ranges: p99 %v-%v, lag %v, CPU %v", *alo.Summary.P99MsMin, *alo.Summary.P99MsMax, *alo.MaxSlotLag, *alo.CPUPerM)
	}
	if alo.ServerP99Ms == nil || *alo.ServerP99Ms > 1 {
		t.Errorf("server share not pooled: %v", alo.ServerP99Ms)
	}
	if eos.Summary.Runs != 2 || eos.Summary.Failed != 1 || eos.Events != 2000 || !strings.Contains(eos.Note, "1 run failed") {
		t.Errorf("exactly-once summary: %+v, note %q", eos.Summary, eos.Note)
	}
	if got := shapeLabel(eos); got != "1000/s single-row txns, exactly-once, 2 runs pooled" {
		t.Errorf("label %q", got)
	}
	// The targets read the summaries.
	var ratio string
	for _, tg := range Evaluate(append(runs, sums...)) {
		if strings.HasPrefix(tg.Name, "exactly-once steady") {
			ratio = tg.Measured
		}
	}
	if want := fmt.Sprintf("%.2f", *eos.P99Ms / *alo.P99Ms); ratio != want {
		t.Errorf("target measured %q, want %s", ratio, want)
	}
}

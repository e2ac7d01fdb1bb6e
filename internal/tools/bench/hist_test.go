package bench

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

const metricsBody = `# HELP eventforge_cdc_commit_to_ack_seconds Time from commit to ack.
# TYPE eventforge_cdc_commit_to_ack_seconds histogram
eventforge_cdc_commit_to_ack_seconds_bucket{le="0.001"} %d
eventforge_cdc_commit_to_ack_seconds_bucket{le="0.002"} %d
eventforge_cdc_commit_to_ack_seconds_bucket{le="0.004"} %d
eventforge_cdc_commit_to_ack_seconds_bucket{le="+Inf"} %d
eventforge_cdc_commit_to_ack_seconds_sum 1.5
eventforge_cdc_commit_to_ack_seconds_count %d
eventforge_cdc_other_bucket{le="0.001"} 999
`

func body(a, b, c, inf int) string {
	return fmt.Sprintf(metricsBody, a, b, c, inf, inf)
}

func mustParse(t *testing.T, s string) Histogram {
	t.Helper()
	h, err := ParseHistogram(strings.NewReader(s), commitToAck)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestParseHistogram(t *testing.T) {
	h := mustParse(t, body(10, 20, 30, 40))
	if len(h.Bounds) != 4 || !math.IsInf(h.Bounds[3], 1) || h.Bounds[0] != 0.001 {
		t.Fatalf("bounds = %v", h.Bounds)
	}
	if want := []uint64{10, 20, 30, 40}; !equalU(h.Cum, want) || h.Count != 40 {
		t.Fatalf("cum = %v count %d, want %v and 40", h.Cum, h.Count, want)
	}
}

func TestParseHistogramSumsLabelledSeries(t *testing.T) {
	in := `m_bucket{topic="a",le="1"} 1
m_bucket{topic="b",le="1"} 2
m_bucket{topic="a",le="+Inf"} 3
m_bucket{topic="b",le="+Inf"} 4
m_count{topic="a"} 3
m_count{topic="b"} 4
`
	h, err := ParseHistogram(strings.NewReader(in), "m")
	if err != nil {
		t.Fatal(err)
	}
	if !equalU(h.Cum, []uint64{3, 7}) || h.Count != 7 {
		t.Fatalf("got %+v", h)
	}
}

func TestParseHistogramMissingIsEmpty(t *testing.T) {
	h := mustParse(t, "other_metric 1\n")
	if h.Count != 0 || len(h.Bounds) != 0 || !math.IsNaN(h.Quantile(0.5)) {
		t.Fatalf("got %+v", h)
	}
}

func TestQuantileFromBucketDeltas(t *testing.T) {
	before := mustParse(t, body(100, 100, 100, 100)) // earlier samples: all under 1 ms
	after := mustParse(t, body(100, 200, 300, 300))  // then 100 in (1,2] ms and 100 in (2,4] ms
	d := after.Sub(before)
	if d.total() != 200 {
		t.Fatalf("delta has %d samples, want 200", d.total())
	}
	for _, tc := range []struct {
		q, want float64
	}{
		{0.25, 0.0015}, // rank 50 of 100 in (1,2]: halfway
		{0.5, 0.002},   // rank 100: the top of the first non-empty bucket
		{0.75, 0.003},  // rank 150: halfway through (2,4]
		{0.99, 0.00396},
		{1, 0.004},
	} {
		if got := d.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%.3f = %g, want %g", tc.q, got, tc.want)
		}
	}
}

func TestQuantileEdges(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Histogram
		q    float64
		want float64
	}{
		{"first bucket starts at zero", Histogram{Bounds: []float64{0.01, math.Inf(1)}, Cum: []uint64{4, 4}}, 0.5, 0.005},
		{"rank in +Inf answers the highest finite bound", Histogram{Bounds: []float64{0.01, math.Inf(1)}, Cum: []uint64{1, 10}}, 0.99, 0.01},
		{"empty", Histogram{Bounds: []float64{0.01, math.Inf(1)}, Cum: []uint64{0, 0}}, 0.5, math.NaN()},
		{"fine low buckets", Histogram{Bounds: []float64{0.0005, 0.001, 0.0015, 0.002, math.Inf(1)}, Cum: []uint64{0, 50, 90, 100, 100}}, 0.99, 0.00195},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.h.Quantile(tc.q)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12) {
				t.Fatalf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestSubMatchesBucketsByBound(t *testing.T) {
	before := Histogram{Bounds: []float64{1, math.Inf(1)}, Cum: []uint64{5, 6}, Count: 6}
	after := Histogram{Bounds: []float64{0.5, 1, math.Inf(1)}, Cum: []uint64{2, 9, 12}, Count: 12}
	d := after.Sub(before)
	if !equalU(d.Cum, []uint64{2, 4, 6}) || d.Count != 6 {
		t.Fatalf("got %+v", d)
	}
	// A restarted process (counts went down) never gives negative counts.
	if d := before.Sub(after); !equalU(d.Cum, []uint64{0, 0}) || d.Count != 0 {
		t.Fatalf("got %+v", d)
	}
}

func TestSumCounter(t *testing.T) {
	in := `# TYPE eventforge_worker_events_total counter
eventforge_worker_events_total{consumer="g",result="applied",topic="a"} 10
eventforge_worker_events_total{consumer="g",result="applied",topic="b"} 5
eventforge_worker_events_total{consumer="g",result="dlq",topic="a"} 1
eventforge_worker_events_total_other{result="applied"} 100
`
	for _, tc := range []struct {
		match map[string]string
		want  float64
	}{
		{map[string]string{"result": "applied"}, 15},
		{map[string]string{"result": "dlq"}, 1},
		{map[string]string{"result": "applied", "topic": "b"}, 5},
		{map[string]string{"result": "skipped"}, 0},
		{nil, 16},
	} {
		got, err := SumCounter(strings.NewReader(in), "eventforge_worker_events_total", tc.match)
		if err != nil || got != tc.want {
			t.Errorf("SumCounter(%v) = %v, %v; want %v", tc.match, got, err, tc.want)
		}
	}
}

func equalU(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

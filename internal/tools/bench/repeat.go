package bench

import (
	"fmt"
	"slices"
)

// Spread summarizes the runs of a repeated drain (--repeat) of one shape and
// mode. The summary row holds the medians in its usual fields (events_per_sec,
// cpu_seconds_per_million, ratio, …); Spread adds the range and the outliers.
type Spread struct {
	Runs            int      `json:"runs"`             // runs summarized: those that did not fail
	Failed          int      `json:"failed,omitempty"` // runs that failed, left out
	EventsPerSecMin float64  `json:"events_per_sec_min"`
	EventsPerSecMax float64  `json:"events_per_sec_max"`
	CPUPerMMin      *float64 `json:"cpu_seconds_per_million_min,omitempty"`
	CPUPerMMax      *float64 `json:"cpu_seconds_per_million_max,omitempty"`
	// Outliers are the runs whose events/s is below half the median; each is
	// flagged in its own row (outlier: true). Drains only.
	Outliers int `json:"outliers"`
	// P99MsMin and P99MsMax are the range of the runs' own p99 latencies
	// around the pooled p99 of a steady rate.
	P99MsMin *float64 `json:"p99_ms_min,omitempty"`
	P99MsMax *float64 `json:"p99_ms_max,omitempty"`
}

// outlierFraction: a run below this fraction of the median events/s is an outlier.
const outlierFraction = 0.5

// summarize returns the summary row of the runs of one shape and mode and
// flags their outliers. Failed runs are left out of the figures.
func summarize(runs []Row) Row {
	ptrs := make([]*Row, len(runs))
	for i := range runs {
		ptrs[i] = &runs[i]
	}
	sum, ok := newSummary(ptrs)
	sum.Events = runs[0].Events
	if len(ok) == 0 {
		return sum
	}
	sp := sum.Summary
	rates := values(ok, func(r *Row) *float64 { return &r.EventsPerSec })
	sum.EventsPerSec = median(rates)
	sp.EventsPerSecMin, sp.EventsPerSecMax = slices.Min(rates), slices.Max(rates)
	sum.Seconds = median(values(ok, func(r *Row) *float64 { return &r.Seconds }))
	sum.RecvLogicalPerSec = medianOf(ok, func(r *Row) *float64 { return r.RecvLogicalPerSec })
	sum.Ratio = medianOf(ok, func(r *Row) *float64 { return r.Ratio })
	sum.CPUPerM = medianOf(ok, func(r *Row) *float64 { return r.CPUPerM })
	sum.RecvLogicalCPUPerM = medianOf(ok, func(r *Row) *float64 { return r.RecvLogicalCPUPerM })
	sum.WalSenderCPUPerM = medianOf(ok, func(r *Row) *float64 { return r.WalSenderCPUPerM })
	sum.RecvLogicalWalSenderCPUPerM = medianOf(ok, func(r *Row) *float64 { return r.RecvLogicalWalSenderCPUPerM })
	sum.PeakRSSMB = medianOf(ok, func(r *Row) *float64 { return r.PeakRSSMB })
	sum.RecordsPerRequest = medianOf(ok, func(r *Row) *float64 { return r.RecordsPerRequest })
	if cpu := values(ok, func(r *Row) *float64 { return r.CPUPerM }); len(cpu) > 0 {
		sp.CPUPerMMin, sp.CPUPerMMax = f64(slices.Min(cpu)), f64(slices.Max(cpu))
	}
	for _, r := range ok {
		if r.EventsPerSec < outlierFraction*sum.EventsPerSec {
			r.Outlier = true
			sp.Outliers++
		}
	}
	sum.Note = spreadNote(sp)
	return sum
}

// newSummary starts the summary row of runs (one shape or rate, one mode):
// their identity, the highest load average, and a Spread counting the runs
// that did not fail, which it returns. With none, the row says so in Error.
func newSummary(runs []*Row) (Row, []*Row) {
	first := runs[0]
	sum := Row{Stage: first.Stage, Shape: first.Shape, Mode: first.Mode, Runs: len(runs)}
	var ok []*Row
	for _, r := range runs {
		sum.LoadAvg = max(sum.LoadAvg, r.LoadAvg)
		if r.Error == "" {
			ok = append(ok, r)
		}
	}
	sum.Summary = &Spread{Runs: len(ok), Failed: len(runs) - len(ok)}
	if len(ok) == 0 {
		sum.Error = fmt.Sprintf("all %d runs failed", len(runs))
	}
	return sum, ok
}

// spreadNote describes the range of a summary row.
func spreadNote(sp *Spread) string {
	note := fmt.Sprintf("median of %d runs; events/s %.0f to %.0f", sp.Runs, sp.EventsPerSecMin, sp.EventsPerSecMax)
	if sp.CPUPerMMin != nil {
		note += fmt.Sprintf("; CPU s/M %.1f to %.1f", *sp.CPUPerMMin, *sp.CPUPerMMax)
	}
	if sp.Failed > 0 {
		note += fmt.Sprintf("; %s failed, left out", runsText(sp.Failed))
	}
	if sp.Outliers > 0 {
		note = fmt.Sprintf("OUTLIERS: %s below half the median events/s; %s", runsText(sp.Outliers), note)
	}
	return note
}

// runsText is "1 run" or "n runs".
func runsText(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// values are the figures get finds in rows (nil: none).
func values(rows []*Row, get func(*Row) *float64) []float64 {
	var out []float64
	for _, r := range rows {
		if v := get(r); v != nil {
			out = append(out, *v)
		}
	}
	return out
}

// medianOf is the median of the figures get finds, nil when there are none.
func medianOf(rows []*Row, get func(*Row) *float64) *float64 {
	v := values(rows, get)
	if len(v) == 0 {
		return nil
	}
	return f64(median(v))
}

// median of v (not empty); the mean of the middle two for an even count.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// shapeLabel is a row's shape as the table shows it: with "run i/N" for a
// run of a repeated drain and "median of N" for its summary.
func shapeLabel(r Row) string {
	switch {
	case r.Summary != nil && r.Stage == StageSteady:
		return fmt.Sprintf("%s, %d runs pooled", r.Shape, r.Summary.Runs)
	case r.Summary != nil:
		return fmt.Sprintf("%s, median of %d", r.Shape, r.Runs)
	case r.Runs > 1:
		return fmt.Sprintf("%s, run %d/%d", r.Shape, r.Run, r.Runs)
	}
	return r.Shape
}

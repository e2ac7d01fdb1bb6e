package bench

import (
	"context"
	"fmt"
	"slices"
)

// steadyRounds runs the steady stage --repeat times, each round in every
// mode in turn, so that a change in the machine's load during the bench
// falls on both modes alike. Above one round, a summary row per rate and
// mode follows the runs.
func (r *runner) steadyRounds(ctx context.Context) []Row {
	n := max(r.cfg.Repeat, 1)
	if n == 1 {
		return r.inModes(ctx, r.steady)
	}
	var runs []Row
	for i := 1; i <= n; i++ {
		r.cfg.Log.Info("steady round", "round", i, "of", n)
		got := r.inModes(ctx, r.steady)
		for j := range got {
			got[j].Run, got[j].Runs = i, n
		}
		runs = append(runs, got...)
		if ctx.Err() != nil {
			break
		}
	}
	return append(runs, summarizeSteady(runs)...)
}

// summarizeSteady returns a summary row per mode and rate of repeated steady
// runs, in the order the rates first ran. A single run's p99 holds about 1%
// of its samples, a few hundred, so one stall of the machine moves it; the
// summary's latencies are quantiles of every run's samples pooled, with the
// runs' own p99 range beside them. Failed runs are left out.
func summarizeSteady(runs []Row) []Row {
	type key struct{ mode, shape string }
	var order []key
	groups := map[key][]*Row{}
	for i := range runs {
		k := key{runs[i].Mode, runs[i].Shape}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], &runs[i])
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		out = append(out, summarizeSteadyRate(groups[k]))
	}
	return out
}

// summarizeSteadyRate summarizes the runs of one mode and rate.
func summarizeSteadyRate(runs []*Row) Row {
	sum, ok := newSummary(runs)
	sum.TargetPerSec = runs[0].TargetPerSec
	if len(ok) == 0 {
		return sum
	}
	sp := sum.Summary
	var lat, srv Histogram
	var lag int64
	for _, r := range ok {
		sum.Events += r.Events
		sum.Seconds += r.Seconds
		lat, srv = lat.Add(r.latency), srv.Add(r.server)
		if r.MaxSlotLag != nil {
			lag = max(lag, *r.MaxSlotLag)
		}
		sum.WriterShort = sum.WriterShort || r.WriterShort
	}
	if sum.Seconds > 0 {
		sum.EventsPerSec = float64(sum.Events) / sum.Seconds
	}
	sum.latency, sum.server = lat, srv
	if lat.total() > 0 {
		sum.P50Ms, sum.P99Ms, sum.P999Ms = f64(1000*lat.Quantile(0.5)), f64(1000*lat.Quantile(0.99)), f64(1000*lat.Quantile(0.999))
		sum.LatencyCount = i64(int64(lat.total()))
	}
	if srv.total() > 0 {
		sum.ServerP50Ms, sum.ServerP99Ms = f64(1000*srv.Quantile(0.5)), f64(1000*srv.Quantile(0.99))
	}
	sum.MaxSlotLag = i64(lag)
	sum.CPUPerM = medianOf(ok, func(r *Row) *float64 { return r.CPUPerM })
	sum.PeakRSSMB = medianOf(ok, func(r *Row) *float64 { return r.PeakRSSMB })
	if p99 := values(ok, func(r *Row) *float64 { return r.P99Ms }); len(p99) > 0 {
		sp.P99MsMin, sp.P99MsMax = f64(slices.Min(p99)), f64(slices.Max(p99))
	}
	sum.Note = steadyNote(sp)
	return sum
}

// steadyNote describes the runs behind a steady summary row.
func steadyNote(sp *Spread) string {
	note := fmt.Sprintf("latency of %d runs pooled", sp.Runs)
	if sp.P99MsMin != nil {
		note += fmt.Sprintf("; p99 per run %.2f to %.2f ms", *sp.P99MsMin, *sp.P99MsMax)
	}
	if sp.Failed > 0 {
		note += fmt.Sprintf("; %s failed, left out", runsText(sp.Failed))
	}
	return note
}

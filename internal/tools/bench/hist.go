package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Histogram is one Prometheus histogram read from the text exposition format:
// cumulative counts per upper bound, sorted by bound, +Inf last.
type Histogram struct {
	Bounds []float64 // upper bounds (le), ascending; the last is +Inf
	Cum    []uint64  // cumulative count at each bound
	Count  uint64
}

// ParseHistogram reads the histogram named name (without the _bucket suffix)
// from a /metrics body. Series with other labels are summed bucket by bucket,
// so a histogram with labels reads as their total. A missing histogram is an
// empty one, not an error: the relay registers it before its first sample but
// the bench must not depend on that.
func ParseHistogram(r io.Reader, name string) (Histogram, error) {
	byBound := map[float64]uint64{}
	var count uint64
	err := eachSample(r, func(base, labels, value string) error {
		switch base {
		case name + "_bucket":
			le, ok := labelValue(labels, "le")
			if !ok {
				return fmt.Errorf("parse %s: bucket without le: %q", name, labels)
			}
			bound, err := parseFloat(le)
			if err != nil {
				return fmt.Errorf("parse %s: le %q: %w", name, le, err)
			}
			v, err := parseFloat(value)
			if err != nil {
				return fmt.Errorf("parse %s: value %q: %w", name, value, err)
			}
			byBound[bound] += uint64(v)
		case name + "_count":
			v, err := parseFloat(value)
			if err != nil {
				return fmt.Errorf("parse %s: count %q: %w", name, value, err)
			}
			count += uint64(v)
		}
		return nil
	})
	if err != nil {
		return Histogram{}, err
	}
	h := Histogram{Count: count}
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Cum = append(h.Cum, byBound[b])
	}
	return h, nil
}

// splitSample splits `metric{labels} value [timestamp]` into metric and value.
func splitSample(line string) (metric, value string, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", false
	}
	end := strings.LastIndexByte(line, '}')
	if end < 0 {
		end = strings.IndexByte(line, ' ') - 1
		if end < 0 {
			return "", "", false
		}
	}
	metric = line[:end+1]
	fields := strings.Fields(line[end+1:])
	if len(fields) == 0 {
		return "", "", false
	}
	return metric, fields[0], true
}

// labelValue finds name="value" in a label list like `a="x",le="0.5"}`.
func labelValue(labels, name string) (string, bool) {
	for _, part := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && k == name {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

func parseFloat(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}

// Sub returns the observations made between before and h: the bucket deltas.
// Buckets are matched by bound, so a scrape that gained or lost buckets (a
// restarted relay) still subtracts what it can; counts never go below zero.
func (h Histogram) Sub(before Histogram) Histogram {
	prev := make(map[float64]uint64, len(before.Bounds))
	for i, b := range before.Bounds {
		prev[b] = before.Cum[i]
	}
	out := Histogram{Bounds: h.Bounds, Cum: make([]uint64, len(h.Cum))}
	for i, b := range h.Bounds {
		if p := prev[b]; p < h.Cum[i] {
			out.Cum[i] = h.Cum[i] - p
		}
	}
	if before.Count < h.Count {
		out.Count = h.Count - before.Count
	}
	return out
}

// Add pools h and other, which have the same bounds (two deltas of one
// histogram); an empty side gives the other.
func (h Histogram) Add(other Histogram) Histogram {
	if len(h.Bounds) == 0 {
		return other
	}
	if len(other.Bounds) == 0 {
		return h
	}
	theirs := make(map[float64]uint64, len(other.Bounds))
	for i, b := range other.Bounds {
		theirs[b] = other.Cum[i]
	}
	out := Histogram{Bounds: h.Bounds, Cum: make([]uint64, len(h.Cum)), Count: h.Count + other.Count}
	for i, b := range h.Bounds {
		out.Cum[i] = h.Cum[i] + theirs[b]
	}
	return out
}

// Quantile estimates the q-quantile (0 < q ≤ 1) by linear interpolation
// inside the bucket holding the rank, as Prometheus' histogram_quantile does:
// the first bucket starts at 0, and a rank in the +Inf bucket answers the
// highest finite bound. It is NaN for an empty histogram.
func (h Histogram) Quantile(q float64) float64 {
	total := h.total()
	if total == 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	i := sort.Search(len(h.Cum), func(i int) bool { return float64(h.Cum[i]) >= rank })
	if i == len(h.Cum) {
		i = len(h.Cum) - 1
	}
	if math.IsInf(h.Bounds[i], 1) {
		if i == 0 {
			return math.NaN()
		}
		return h.Bounds[i-1]
	}
	lo, below := 0.0, uint64(0)
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Cum[i-1]
	}
	in := h.Cum[i] - below
	if in == 0 {
		return h.Bounds[i]
	}
	return lo + (h.Bounds[i]-lo)*(rank-float64(below))/float64(in)
}

// total is the number of observations: the +Inf bucket, else _count.
func (h Histogram) total() uint64 {
	if n := len(h.Cum); n > 0 && h.Cum[n-1] > 0 {
		return h.Cum[n-1]
	}
	return h.Count
}

// SumCounter adds every sample of counter name whose labels contain all of
// match (name="value" pairs), from a /metrics body.
func SumCounter(r io.Reader, name string, match map[string]string) (float64, error) {
	var sum float64
	err := eachSample(r, func(base, labels, value string) error {
		if base != name {
			return nil
		}
		for k, want := range match {
			if v, ok := labelValue(labels, k); !ok || v != want {
				return nil
			}
		}
		v, err := parseFloat(value)
		if err != nil {
			return fmt.Errorf("parse %s: value %q: %w", name, value, err)
		}
		sum += v
		return nil
	})
	return sum, err
}

// eachSample calls fn with the metric name, the label list (after "{") and
// the value of every sample of a /metrics body, skipping comments.
func eachSample(r io.Reader, fn func(base, labels, value string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		metric, value, ok := splitSample(line)
		if !ok {
			continue
		}
		base, labels, _ := strings.Cut(metric, "{")
		if err := fn(base, labels, value); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read metrics: %w", err)
	}
	return nil
}

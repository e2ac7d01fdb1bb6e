package console

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseLSN(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0/0", 0, true},
		{"0/195DC610", 0x195DC610, true},
		{"1/0", 1 << 32, true},
		{"FFFFFFFF/FFFFFFFF", 1<<64 - 1, true},
		{"", 0, false},
		{"195DC610", 0, false},
		{"1/2/3", 0, false},
		{"100000000/0", 0, false},
		{"x/1", 0, false},
	}
	for _, c := range cases {
		got, err := parseLSN(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseLSN(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseLSN(f *testing.F) {
	for _, s := range []string{"0/0", "0/195DC610", "A/1", "1/2/3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseLSN(s)
		if err != nil {
			return
		}
		back, err := parseLSN(formatLSN(v))
		if err != nil || back != v {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, v, formatLSN(v), back, err)
		}
	})
}

const exposition = `# HELP eventforge_worker_events_total Events handled.
# TYPE eventforge_worker_events_total counter
eventforge_worker_events_total{consumer="c",result="applied",topic="t"} 3
eventforge_worker_events_total{consumer="c",result="duplicate",topic="t"} 2
eventforge_worker_events_total{consumer="c",result="duplicate",topic="u"} 1
eventforge_worker_retries_total{consumer="c",topic="t"} 4
eventforge_cdc_publish_errors_total 0
eventforge_worker_dlq_oldest_age_seconds{topic="t.dlq"} 12.5
eventforge_worker_dlq_oldest_age_seconds{topic="u.dlq"} 3
not a sample
broken_value{a="b"} x
`

func TestParseSamplesAndSums(t *testing.T) {
	ms, err := parseSamples(bufio.NewScanner(strings.NewReader(exposition)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("%d samples, want 7: %+v", len(ms), ms)
	}
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"duplicates of every topic", sum(ms, "eventforge_worker_events_total", `result="duplicate"`), 3},
		{"duplicates of topic t", sum(ms, "eventforge_worker_events_total", `result="duplicate"`, `topic="t"`), 2},
		{"every event", sum(ms, "eventforge_worker_events_total"), 6},
		{"unlabelled", sum(ms, "eventforge_cdc_publish_errors_total"), 0},
		{"absent", sum(ms, "eventforge_nothing"), 0},
		{"oldest dead letter", maxOf(ms, "eventforge_worker_dlq_oldest_age_seconds"), 12.5},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if !has(ms, "eventforge_worker_retries_total", `topic="t"`) || has(ms, "eventforge_worker_retries_total", `topic="u"`) {
		t.Error("has: wrong answer")
	}
}

func FuzzParseSamples(f *testing.F) {
	f.Add(exposition)
	f.Add("a{b=\"c\"} 1\n# x\n")
	f.Fuzz(func(t *testing.T, text string) {
		ms, _ := parseSamples(bufio.NewScanner(strings.NewReader(text)))
		for _, s := range ms {
			if s.name == "" && s.labels == "" {
				t.Fatalf("sample without a name from %q", text)
			}
		}
	})
}

package console

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sample is one line of a Prometheus text exposition.
type sample struct {
	name, labels string
	value        float64
}

// scrape reads /metrics of addr (host:port).
func scrape(ctx context.Context, addr string) ([]sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	return parseSamples(bufio.NewScanner(resp.Body))
}

// parseSamples reads the sample lines of a text exposition; comments and
// lines it cannot read are skipped.
func parseSamples(sc *bufio.Scanner) ([]sample, error) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []sample
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		head := line[:sp]
		s := sample{name: head, value: v}
		if i := strings.IndexByte(head, '{'); i >= 0 {
			s.name, s.labels = head[:i], head[i:]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// matches reports whether s is named name and has every wanted label
// (each as `key="value"`).
func (s sample) matches(name string, want []string) bool {
	if s.name != name {
		return false
	}
	for _, w := range want {
		if !strings.Contains(s.labels, w) {
			return false
		}
	}
	return true
}

// sum adds the samples named name with every wanted label.
func sum(samples []sample, name string, want ...string) float64 {
	var t float64
	for _, s := range samples {
		if s.matches(name, want) {
			t += s.value
		}
	}
	return t
}

// maxOf is the largest value of the samples named name (0 when none).
func maxOf(samples []sample, name string) float64 {
	var m float64
	for _, s := range samples {
		if s.name == name && s.value > m {
			m = s.value
		}
	}
	return m
}

// has reports whether a sample named name has all the wanted labels.
func has(samples []sample, name string, want ...string) bool {
	for _, s := range samples {
		if s.matches(name, want) {
			return true
		}
	}
	return false
}

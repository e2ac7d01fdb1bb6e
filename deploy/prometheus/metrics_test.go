package prometheus_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const repo = "../.."

// registered finds the metric names the code registers: every
// `Name: "eventforge_…"` (or `NewDesc("eventforge_…"` of a custom
// collector) of a metrics.go file.
func registered(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "*", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(repo, "internal", "*", "*", "metrics.go"))
	files = append(files, more...)
	nameRE := regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"(eventforge_[a-z0-9_]+)"`)
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range nameRE.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = f
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d registered metrics in %v", len(out), files)
	}
	return out
}

var usedRE = regexp.MustCompile(`eventforge_[a-z0-9_]+`)

// used returns the eventforge_ series an expression reads, histogram
// suffixes stripped.
func used(expr string) []string {
	var out []string
	for _, m := range usedRE.FindAllString(expr, -1) {
		for _, suf := range []string{"_bucket", "_count", "_sum"} {
			if strings.HasSuffix(m, "_seconds"+suf) || strings.HasSuffix(m, "_size"+suf) {
				m = strings.TrimSuffix(m, suf)
			}
		}
		out = append(out, m)
	}
	return out
}

// documented returns the metric names docs/metrics.md lists in its tables
// (first column, in backquotes) and those it marks as not exported yet.
func documented(t *testing.T) (all, pending map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	all, pending = map[string]bool{}, map[string]bool{}
	rowRE := regexp.MustCompile("(?m)^\\|\\s*`(eventforge_[a-z0-9_]+)`[^|]*\\|(.*)$")
	for _, m := range rowRE.FindAllStringSubmatch(string(b), -1) {
		all[m[1]] = true
		if strings.Contains(strings.ToLower(m[2]), "not exported yet") {
			pending[m[1]] = true
		}
	}
	return all, pending
}

// docs/metrics.md is the one place metric names are documented: every
// metric the code registers is there, every metric the alerts and the
// dashboard read is either registered or marked "not exported yet", and a
// metric marked so is not registered after all.
func TestMetricsDocumentedOnce(t *testing.T) {
	t.Parallel()
	reg := registered(t)
	doc, pending := documented(t)
	for name, file := range reg {
		if !doc[name] {
			t.Errorf("%s (registered in %s) is not documented in docs/metrics.md", name, file)
		}
		if pending[name] {
			t.Errorf("%s is registered in %s but docs/metrics.md says it is not exported yet", name, file)
		}
	}
	reads := map[string]string{}
	for _, a := range alerts(t) {
		for _, m := range used(a.Expr) {
			reads[m] = "alert " + a.Alert
		}
	}
	for _, q := range dashboardQueries(t) {
		for _, m := range used(q.expr) {
			reads[m] = "dashboard panel " + q.panel
		}
	}
	for _, name := range slices.Sorted(maps.Keys(reads)) {
		switch {
		case !doc[name]:
			t.Errorf("%s, read by %s, is not documented in docs/metrics.md", name, reads[name])
		case reg[name] == "" && !pending[name]:
			t.Errorf("%s, read by %s, is registered nowhere: mark it \"not exported yet\" in docs/metrics.md or fix the name", name, reads[name])
		}
	}
	for name := range doc {
		if reg[name] == "" && !pending[name] {
			t.Errorf("docs/metrics.md documents %s, which no metrics.go registers", name)
		}
	}
}

type query struct{ panel, expr string }

// dashboardQueries returns every PromQL expression of the dashboard: panel
// targets (also inside collapsed rows) and template variable queries.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	var d struct {
		UID        string            `json:"uid"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "grafana", "eventforge.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("eventforge.json: %v", err)
	}
	if d.UID == "" {
		t.Error("dashboard has no uid")
	}
	var out []query
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p struct {
				ID         int                   `json:"id"`
				Title      string                `json:"title"`
				Type       string                `json:"type"`
				Datasource *struct{ UID string } `json:"datasource"`
				Panels     []json.RawMessage     `json:"panels"`
				Targets    []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not use the $datasource variable", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, query{p.Title, tg.Expr})
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			// label_values(metric, label) is Grafana's, not PromQL: check
			// its metric.
			m := regexp.MustCompile(`^label_values\((eventforge_[a-z0-9_]+),\s*[a-z_]+\)$`).FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("variable %s: unexpected query %q", v.Name, v.Definition)
				continue
			}
			out = append(out, query{"variable " + v.Name, m[1]})
		}
	}
	return out
}

// Every dashboard query parses as PromQL: promtool checks them as recording
// rules, with Grafana's variables replaced by values.
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	t.Parallel()
	qs := dashboardQueries(t)
	if len(qs) < 20 {
		t.Fatalf("only %d queries in the dashboard", len(qs))
	}
	replacer := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$slot", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range qs {
		expr := replacer.Replace(q.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("panel %q: unknown variable in %q", q.panel, q.expr)
		}
		e, _ := json.Marshal(expr) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, e)
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runPromtool(t, "check", "rules", path); !strings.Contains(out, fmt.Sprintf("%d rules found", len(qs))) {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

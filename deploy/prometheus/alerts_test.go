package prometheus_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alerts(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, filepath.Join("rules", "eventforge.rules.yml"), &f)
	var out []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alerts in eventforge.rules.yml")
	}
	return out
}

// The list of conditions, each an alert (by name) that must exist.
var requiredAlerts = []string{
	"EventForgeSlotLagHigh",        // slot lag above a threshold
	"EventForgeSlotWALUnreserved",  // wal_status unreserved
	"EventForgeSlotLost",           // wal_status lost
	"EventForgeSlotInactive",       // slot inactive
	"EventForgeRelayNotReady",      // relay not ready
	"EventForgeRelayDown",          // relay not ready: not even up
	"EventForgeCommitToAckSlow",    // commit-to-ack p99 above a threshold
	"EventForgeConsumerLagGrowing", // consumer lag growing
	"EventForgeDeadLetters",        // dead letters present
	"EventForgeDeadLetterOld",      // and their age
}

// Every alert has a promtool case where it fires and one where it must not,
// the labels and annotations routing and the runbook rely on, and a runbook
// section under its own name.
func TestEveryAlertIsTestedAndDocumented(t *testing.T) {
	t.Parallel()
	var tests ruleTests
	readYAML(t, filepath.Join("rules", "eventforge.rules.test.yml"), &tests)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	runbook, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(runbook))
	have := map[string]bool{}
	for _, a := range alerts(t) {
		have[a.Alert] = true
		if !firing[a.Alert] || !quiet[a.Alert] {
			t.Errorf("%s: promtool cases firing=%v not-firing=%v, want both", a.Alert, firing[a.Alert], quiet[a.Alert])
		}
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, s)
		}
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if a.Annotations[k] == "" {
				t.Errorf("%s: no %s annotation", a.Alert, k)
			}
		}
		want := "docs/runbook.md#" + strings.ToLower(a.Alert)
		if a.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
		}
		if !anchors[strings.ToLower(a.Alert)] {
			t.Errorf("%s: docs/runbook.md has no section headed %s", a.Alert, a.Alert)
		}
	}
	for _, name := range requiredAlerts {
		if !have[name] {
			t.Errorf("alert %s is missing from eventforge.rules.yml", name)
		}
	}
}

var headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// headingAnchors returns the GitHub-style anchors of the Markdown headings.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(md, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out[b.String()] = true
	}
	return out
}

// Links inside the runbook and the metrics page lead to a heading.
func TestDocAnchorsResolve(t *testing.T) {
	t.Parallel()
	linkRE := regexp.MustCompile(`\]\((?:([a-z]+\.md))?#([a-z0-9_-]+)\)`)
	docs := map[string]map[string]bool{}
	for _, name := range []string{"runbook.md", "metrics.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = headingAnchors(string(b))
	}
	checked := 0
	for name := range docs {
		b, _ := os.ReadFile(filepath.Join("..", "..", "docs", name))
		links := linkRE.FindAllStringSubmatch(string(b), -1)
		checked += len(links)
		for _, m := range links {
			target := name
			if m[1] != "" {
				target = m[1]
			}
			if anchors, ok := docs[target]; ok && !anchors[m[2]] {
				t.Errorf("%s links to %s#%s, which has no such heading", name, target, m[2])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d anchor links found: is the pattern right?", checked)
	}
}

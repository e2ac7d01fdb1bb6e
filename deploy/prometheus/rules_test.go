package prometheus_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promtool returns the path of promtool. It is part of the test suite: CI
// (CI=true) fails without it; elsewhere the tests skip with the install hint.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found: install it (apt-get install prometheus)")
		}
		t.Skip("promtool not found: apt-get install prometheus")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestPromtoolChecksConfigAndRules(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"}, // also checks the rule files it loads
		{"check", "rules", filepath.Join("rules", "eventforge.rules.yml")},
	} {
		out := runPromtool(t, args...)
		if !strings.Contains(out, "SUCCESS") {
			t.Errorf("promtool %s:\n%s", strings.Join(args, " "), out)
		}
	}
	if out := runPromtool(t, "check", "config", "prometheus.yml"); !strings.Contains(out, "1 rule files found") {
		t.Errorf("prometheus.yml does not load the rules:\n%s", out)
	}
}

func TestPromtoolUnitTestsOfAlerts(t *testing.T) {
	t.Parallel()
	out := runPromtool(t, "test", "rules", filepath.Join("rules", "eventforge.rules.test.yml"))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

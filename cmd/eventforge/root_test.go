package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// probeCmd is a command with the shared flags whose run records what it saw.
func probeCmd(seen *string) *cobra.Command {
	var pg pgFlags
	cmd := &cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { *seen = pg.url; return nil }}
	pg.register(cmd)
	return cmd
}

func runProbe(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var seen string
	root := newRootCmd()
	root.AddCommand(probeCmd(&seen))
	root.SetArgs(append([]string{"probe"}, args...))
	root.SetOut(&bytes.Buffer{})
	err := root.Execute()
	return seen, err
}

func TestFlagsFallBackToEnvironmentAndFlagWins(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"neither", "", nil, ""},
		{"env only", "postgres://env/db", nil, "postgres://env/db"},
		{"flag only", "", []string{"--pg-url", "postgres://flag/db"}, "postgres://flag/db"},
		{"flag beats env", "postgres://env/db", []string{"--pg-url=postgres://flag/db"}, "postgres://flag/db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("EVENTFORGE_PG_URL", tc.env)
			}
			got, err := runProbe(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("pg-url = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{
		"pg-url": "EVENTFORGE_PG_URL", "kafka-brokers": "EVENTFORGE_KAFKA_BROKERS",
		"metrics-addr": "EVENTFORGE_METRICS_ADDR", "http-addr": "EVENTFORGE_HTTP_ADDR",
	} {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}

// TestConfigurationErrorsExitNonZeroWithOneLine runs the real binary.
func TestConfigurationErrorsExitNonZeroWithOneLine(t *testing.T) {
	t.Parallel()
	bin := t.TempDir() + "/eventforge"
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"missing pg url", []string{"migrate"}, nil, "no PostgreSQL URL"},
		{"bad pg url keeps password secret", []string{"migrate", "--pg-url", "postgres://u:s3cret@host:notaport/db"}, nil, "invalid PostgreSQL URL"},
		{"unknown flag", []string{"migrate", "--no-such-flag"}, nil, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatalf("exit 0, want non-zero; stderr %q", stderr.String())
			}
			msg := strings.TrimRight(stderr.String(), "\n")
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
				t.Fatalf("stderr = %q, want one line containing %q", msg, tc.want)
			}
			if strings.Contains(msg, "s3cret") {
				t.Fatalf("stderr leaks the password: %q", msg)
			}
		})
	}
}

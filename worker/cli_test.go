package worker_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testenv"
)

// TestWorkerRunStartupErrors: configuration errors stop `worker run` at
// start-up with status 1 and one clear line on stderr, the password never
// in it.
func TestWorkerRunStartupErrors(t *testing.T) {
	f := newFixture(t, 1)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badYAML := file("bad.yaml", "handlers:\n  order.created:\n    sql: SELECT 1\n    expect_row: 1\n")
	badSQL := file("badsql.yaml", "handlers:\n  order.created:\n    sql: UPDATE ordrs SET status = 'x' WHERE id = $1\n")
	base := []string{"worker", "run", "--group", f.group, "--topics", f.topic}
	tests := []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"unknown YAML key", append(base, "--handlers", badYAML), nil, []string{"bad.yaml", "field expect_row not found"}},
		{"bad SQL", append(base, "--handlers", badSQL), nil, []string{`handler "order.created"`, `relation "ordrs" does not exist`}},
		{"missing file", append(base, "--handlers", filepath.Join(dir, "none.yaml")), nil, []string{"read handlers file"}},
		{"no group", []string{"worker", "run", "--topics", f.topic}, nil, []string{"no consumer group"}},
		{"no topics", []string{"worker", "run", "--group", f.group}, nil, []string{"no topics"}},
		{"bad batch size from env", base, []string{"EVENTFORGE_BATCH_SIZE=0"}, []string{"--batch-size must be positive"}},
		{"unreachable database", base, []string{"EVENTFORGE_PG_URL=postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2"}, []string{"connect to PostgreSQL", "xxxxx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, testenv.Binary(t), tt.args...)
			cmd.Env = append(cmd.Environ(), "EVENTFORGE_KAFKA_BROKERS="+strings.Join(f.brokers, ","), "EVENTFORGE_PG_URL="+f.dbURL)
			cmd.Env = append(cmd.Env, tt.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "eventforge: ") {
				t.Fatalf("last stderr line %q is not the one-line reason", last)
			}
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("reason %q lacks %q", last, w)
				}
			}
			if strings.Contains(stderr.String(), "s3cret") {
				t.Errorf("stderr leaks the password: %s", stderr.String())
			}
		})
	}
}

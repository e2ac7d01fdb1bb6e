package worker_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestWorkerRunStartupErrors: configuration errors stop `worker run` at
// start-up with status 1 and one clear line on stderr, the password never
// in it.
func TestWorkerRunStartupErrors(t *testing.T) {
	t.Parallel()
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
		{"bad SQL", append(base, "--handlers", badSQL), nil, []string{`handler "order.created"`, `relation "ordrs" does not exist`, "eventforge migrate"}},
		{"missing file", append(base, "--handlers", filepath.Join(dir, "none.yaml")), nil, []string{"read handlers file"}},
		{"no group", []string{"worker", "run", "--topics", f.topic}, nil, []string{"--group: required"}},
		{"no topics", []string{"worker", "run", "--group", f.group}, nil, []string{"--topics: required"}},
		{"no group while PostgreSQL is away", []string{"worker", "run", "--topics", f.topic},
			[]string{"EVENTFORGE_PG_URL=postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=2"}, []string{"--group: required"}},
		{"bad batch size from env", base, []string{"EVENTFORGE_BATCH_SIZE=0"}, []string{"--batch-size must be positive"}},
		{"unknown role", base, []string{"EVENTFORGE_PG_URL=" + withUserInfo(t, f.dbURL, "no_such_role_x", "s3cret")}, []string{"connect to PostgreSQL", "xxxxx", "no_such_role_x"}},
		{"unknown database", base, []string{"EVENTFORGE_PG_URL=" + withDatabaseName(t, f.dbURL, "no_such_db_x")}, []string{"connect to PostgreSQL", "no_such_db_x"}},
		{"unmigrated database", base, []string{"EVENTFORGE_PG_URL=" + unmigrated(t, f)}, []string{"processed_events", "eventforge migrate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := testenv.Binary(t) // built before the clock and the deadline start
			began := time.Now()
			defer func() {
				if d := time.Since(began); d > 20*time.Second {
					t.Errorf("took %s to give up: waited for what cannot heal", d)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
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

// withUserInfo is the URL u logged in as user with password.
func withUserInfo(t testing.TB, u, user, password string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.UserPassword(user, password)
	return pu.String()
}

// withDatabaseName is the URL u with another database.
func withDatabaseName(t testing.TB, u, db string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Path = "/" + db
	return pu.String()
}

// unmigrated is the URL of a new database of the fixture's server without
// EventForge's tables.
func unmigrated(t testing.TB, f *fixture) string {
	t.Helper()
	name := testenv.UniqueName("unmigrated")
	f.exec(t, "CREATE DATABASE "+name)
	t.Cleanup(func() { f.exec(t, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	return withDatabaseName(t, f.dbURL, name)
}

// TestWorkerRunWaitsForPostgres: `worker run` started while PostgreSQL is
// unreachable waits for it, as `cdc run` does (one line when the wait
// begins, /readyz saying why), and applies events once it is back; SIGTERM
// then stops it with status 0.
func TestWorkerRunWaitsForPostgres(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	ev := f.orderEvent("a")
	produce(t, f.brokers, ev)
	pgAddr := testenv.FreeAddr(t) // nothing listens there yet
	pu, err := url.Parse(f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = pgAddr
	metrics := testenv.FreeAddr(t)
	cmd := exec.Command(testenv.Binary(t), "worker", "run", "--group", f.group, "--topics", f.topic, "--metrics-addr", metrics)
	cmd.Env = append(cmd.Environ(), "EVENTFORGE_KAFKA_BROKERS="+strings.Join(f.brokers, ","), "EVENTFORGE_PG_URL="+pu.String())
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	waitFor(t, 15*time.Second, "the wait logged", func() bool {
		return strings.Contains(stderr.String(), "cannot reach PostgreSQL; waiting")
	})
	waitFor(t, 10*time.Second, "/readyz saying why", func() bool {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "waiting for PostgreSQL")
	})
	select {
	case <-exited:
		t.Fatalf("worker run exited (%v) while PostgreSQL was away:\n%s", waitErr, stderr.String())
	default:
	}

	testenv.StartProxyAt(t, pgAddr, pgHost(t, f.dbURL))
	waitFor(t, 30*time.Second, "the event recorded after PostgreSQL came back", func() bool {
		return f.count(t, `SELECT count(*) FROM processed_events WHERE event_id = $1`, ev.ID) == 1
	})
	if !strings.Contains(stderr.String(), "outage ended") {
		t.Errorf("the end of the wait was not logged:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("worker run after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker run did not stop on SIGTERM")
	}
}

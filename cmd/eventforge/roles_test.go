package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestRolesRunThePipeline: with the roles of sql/roles.sql, an order posted
// through `api run` (api role) is relayed by `cdc run` (relay role, with
// heartbeats and relay_state updates) and applied by `worker run` (worker
// role, demo handler); no command meets a privilege error and each exits 0
// on SIGTERM.
func TestRolesRunThePipeline(t *testing.T) {
	t.Parallel()
	began := time.Now()
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	admin := opsConn(t, dbURL)
	r := createRoles(t, dbURL, admin)
	brokers := strings.Join(env.Brokers, ",")
	prefix, slot, group := testenv.UniqueName("roles")+"_", testenv.UniqueName("slot"), testenv.UniqueName("g")
	topic := prefix + "orders"
	testenv.DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, prefix)

	relayMetrics := testenv.FreeAddr(t)
	relay := startRolesProc(t, r.url(t, dbURL, r.relay), "cdc", "run", "--slot", slot, "--topic-prefix", prefix,
		"--kafka-brokers", brokers, "--metrics-addr", relayMetrics, "--heartbeat-interval", "500ms", "--status-interval", "1s")
	var initial string
	waitAlive(t, relay, 2*time.Minute, "the relay to stream from its slot", func() bool {
		err := admin.QueryRow(t.Context(), `SELECT s.confirmed_flush_lsn::text FROM pg_replication_slots s
			JOIN relay_state r ON r.slot_name = s.slot_name WHERE s.slot_name = $1 AND s.active`, slot).Scan(&initial)
		return err == nil
	})
	t.Logf("%s: relay streams from %s", time.Since(began).Round(time.Millisecond), slot)

	apiAddr := testenv.FreeAddr(t)
	api := startRolesProc(t, r.url(t, dbURL, r.api), "api", "run", "--http-addr", apiAddr)
	var id string
	waitAlive(t, api, time.Minute, "POST /orders to answer 201", func() bool {
		id = rolesPost(t, apiAddr)
		return id != ""
	})
	t.Logf("%s: order %s created", time.Since(began).Round(time.Millisecond), id)
	waitAlive(t, relay, 2*time.Minute, "the relay to publish the order's event", func() bool {
		return strings.Contains(rolesGet(relayMetrics, "/metrics"), `eventforge_cdc_events_published_total{topic="`+topic+`"} 1`)
	})

	t.Logf("%s: event published to %s", time.Since(began).Round(time.Millisecond), topic)
	handlers := filepath.Join(rolesRepoRoot(t), "deploy", "handlers", "orders.yaml")
	worker := startRolesProc(t, r.url(t, dbURL, r.worker), "worker", "run", "--group", group, "--topics", topic,
		"--handlers", handlers, "--kafka-brokers", brokers)
	waitAlive(t, worker, 2*time.Minute, "the worker to process the order", func() bool {
		var status string
		_ = admin.QueryRow(t.Context(), "SELECT status FROM orders WHERE id = $1", id).Scan(&status)
		return status == "processed"
	})
	t.Logf("%s: order processed", time.Since(began).Round(time.Millisecond))
	var inbox int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM processed_events WHERE consumer = $1", group).Scan(&inbox); err != nil || inbox != 1 {
		t.Errorf("processed_events rows of %s: %d (%v), want 1", group, inbox, err)
	}
	testenv.WaitFor(t, time.Minute, "relay_state to move past the slot's first position (UPDATE)", func() bool {
		var moved bool
		err := admin.QueryRow(t.Context(), "SELECT confirmed_lsn > $2::pg_lsn FROM relay_state WHERE slot_name = $1", slot, initial).Scan(&moved)
		return err == nil && moved
	})
	t.Logf("%s: relay_state moved", time.Since(began).Round(time.Millisecond))

	for _, p := range []*rolesProc{worker, api, relay} {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v after SIGTERM, want exit 0; stderr:\n%s", p.name, err, p.stderr())
		}
		t.Logf("%s: %s stopped", time.Since(began).Round(time.Millisecond), p.name)
		for _, bad := range []string{"permission denied", "42501", "lacks"} {
			if strings.Contains(p.stderr(), bad) {
				t.Errorf("%s logged %q:\n%s", p.name, bad, p.stderr())
			}
		}
		if strings.Contains(p.stderr(), r.password) {
			t.Errorf("%s logged the password", p.name)
		}
	}
}

// TestRolesMissingPrivilegeStopsCommand: each command refuses to start,
// with status 1 and one line naming the role and what it lacks, when its
// role misses one privilege sql/roles.sql grants.
func TestRolesMissingPrivilegeStopsCommand(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	admin := opsConn(t, dbURL)
	brokers := strings.Join(env.Brokers, ",")
	handlers := filepath.Join(rolesRepoRoot(t), "deploy", "handlers", "orders.yaml")
	tests := []struct {
		name   string
		revoke string // %[1]s: login role, %[2]s: its group
		role   func(roleSet) string
		args   []string
		want   string // after `role "<name>" `
	}{
		{"relay without REPLICATION", "ALTER ROLE %[1]s NOREPLICATION", func(r roleSet) string { return r.relay },
			[]string{"cdc", "run", "--slot", testenv.UniqueName("slot"), "--metrics-addr", ""},
			"lacks REPLICATION: the relay needs it to create and read the replication slot; see SECURITY.md#roles"},
		{"worker without INSERT on processed_events", "REVOKE INSERT ON processed_events FROM %[2]s", func(r roleSet) string { return r.worker },
			[]string{"worker", "run", "--group", "g", "--topics", "orders"},
			"lacks INSERT on processed_events: the worker needs it to record each applied event (the inbox)"},
		{"worker whose handler cannot UPDATE orders", "REVOKE UPDATE (status, updated_at) ON orders FROM %[2]s", func(r roleSet) string { return r.worker },
			[]string{"worker", "run", "--group", "g", "--topics", "orders", "--handlers", handlers},
			`lacks a privilege the worker needs for handler "order.created": permission denied for table orders`},
		{"api without INSERT on outbox", "REVOKE INSERT ON outbox FROM %[2]s", func(r roleSet) string { return r.api },
			[]string{"api", "run", "--http-addr", "127.0.0.1:0"},
			"lacks INSERT on outbox: the API needs it to write each order's event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := createRoles(t, dbURL, admin)
			role := tt.role(r)
			if _, err := admin.Exec(t.Context(), fmt.Sprintf(tt.revoke, role, r.group(role))); err != nil {
				t.Fatal(err)
			}
			bin := testenv.Binary(t) // built before the deadline starts
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
			cmd.Env = append(os.Environ(), "EVENTFORGE_PG_URL="+r.url(t, dbURL, role), "EVENTFORGE_KAFKA_BROKERS="+brokers)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			want := fmt.Sprintf("role %q %s", role, tt.want)
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "eventforge: ") || !strings.Contains(last, want) {
				t.Errorf("last stderr line\n  %s\nwant it to hold\n  %s", last, want)
			}
		})
	}
}

// roleSet is one run of sql/roles.sql with unique names.
type roleSet struct {
	relay, worker, api string
	password           string
}

func (r roleSet) group(role string) string { return role + "_group" }

// url is dbURL logged in as role with the script's password (the local
// cluster trusts loopback, so it is only carried, never checked).
func (r roleSet) url(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, r.password)
	return u.String()
}

// createRoles runs sql/roles.sql with psql against dbURL, with the extra
// variables ("name=value") given, and drops its roles (cluster-wide objects)
// at cleanup.
func createRoles(t *testing.T, dbURL string, admin *pgx.Conn, extra ...string) roleSet {
	t.Helper()
	base := testenv.UniqueName("ef")
	r := roleSet{relay: base + "_relay", worker: base + "_worker", api: base + "_api", password: testenv.UniqueName("pw")}
	all := []string{r.relay, r.worker, r.api, r.group(r.relay), r.group(r.worker), r.group(r.api)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", strings.Join(all, ", "))); err != nil {
			t.Logf("drop roles: %v", err)
		}
	})
	args := []string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dbURL, "-f", filepath.Join(rolesRepoRoot(t), "sql", "roles.sql")}
	for k, v := range map[string]string{
		"relay_role": r.relay, "worker_role": r.worker, "api_role": r.api,
		"relay_group": r.group(r.relay), "worker_group": r.group(r.worker), "api_group": r.group(r.api),
		"relay_password": r.password, "worker_password": r.password, "api_password": r.password,
	} {
		args = append(args, "-v", k+"="+v)
	}
	for _, kv := range extra {
		args = append(args, "-v", kv)
	}
	out, err := exec.CommandContext(t.Context(), rolesPsql(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("psql -f sql/roles.sql: %v\n%s", err, out)
	}
	return r
}

// rolesPsql is psql from PATH or the PostgreSQL 15 server binaries.
func rolesPsql(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	p := "/usr/lib/postgresql/15/bin/psql"
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("psql is needed to run sql/roles.sql: not on PATH nor at %s", p)
	}
	return p
}

func rolesRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// rolesPost posts one order; it returns its id, or "" while the API does
// not answer 201 yet.
func rolesPost(t *testing.T, addr string) string {
	t.Helper()
	body := `{"customer":"Ada","amount":1250,"currency":"EUR"}`
	resp, err := http.Post("http://"+addr+"/orders", "application/json", strings.NewReader(body))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Logf("POST /orders: %d %s", resp.StatusCode, b)
		return ""
	}
	var o struct{ ID string }
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("POST /orders answer %s: %v", b, err)
	}
	return o.ID
}

func rolesGet(addr, path string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitAlive waits for cond while p runs; p's exit fails the test at once.
func waitAlive(t *testing.T, p *rolesProc, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ok := false
	testenv.WaitFor(t, timeout, what, func() bool { ok = cond(); return ok || !p.running() })
	if !ok {
		t.Fatalf("%s exited (%v) while waiting for %s; stderr:\n%s", p.name, p.err, what, p.stderr())
	}
}

// rolesProc is an eventforge subprocess; its stderr is kept.
type rolesProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	out  testenv.Buffer
}

func (p *rolesProc) stderr() string { return p.out.String() }

func (p *rolesProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the exit (SIGKILL after a minute).
func (p *rolesProc) stop() error {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

// startRolesProc starts the binary with EVENTFORGE_PG_URL=pgURL; it is stopped
// at cleanup.
func startRolesProc(t *testing.T, pgURL string, args ...string) *rolesProc {
	t.Helper()
	p := &rolesProc{name: strings.Join(args[:2], " "), done: make(chan struct{})}
	p.cmd = exec.Command(testenv.Binary(t), args...)
	p.cmd.Env = append(os.Environ(), "EVENTFORGE_PG_URL="+pgURL)
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if err := p.stop(); err != nil && !t.Failed() {
			t.Logf("%s: %v", p.name, err)
		}
	})
	return p
}

package cdc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// proc is a relay subprocess: the real binary, killed for real.
type proc struct {
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	done   chan struct{}
	err    error
}

func relayArgs(cfg Config) []string {
	return []string{"cdc", "run",
		"--pg-url", cfg.PGURL,
		"--kafka-brokers", strings.Join(cfg.Kafka.Brokers, ","),
		"--slot", cfg.Slot,
		"--topic-prefix", cfg.TopicPrefix,
		"--topic-partitions", "3",
		"--status-interval", "300ms",
		"--heartbeat-interval", "0",
		"--metrics-addr", "",
		"--log-level", "info",
	}
}

func startProc(t testing.TB, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

// startProcEnv starts the binary with extra environment variables on top of
// an environment without EVENTFORGE_ settings.
func startProcEnv(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(testenv.Binary(t), args...), stderr: &testenv.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(childproc.Env(), env...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("relay %d stderr:\n%s", p.cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

func (p *proc) kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// terminate sends SIGTERM and returns the exit code.
func (p *proc) terminate(t testing.TB) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not exit within 30s of SIGTERM")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// waitStreaming waits until the subprocess logs that it streams (the slot
// exists and START_REPLICATION succeeded).
func (p *proc) waitStreaming(t testing.TB) {
	t.Helper()
	waitFor(t, streamingDeadline, "relay streaming", func() bool { return strings.Contains(p.stderr.String(), "msg=streaming") })
}

// TestSIGKILLMidStreamLosesNothing kills the relay twice while events are
// being written and relayed; every committed event must be in Kafka.
func TestSIGKILLMidStreamLosesNothing(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	wdb := connect(t, url)
	p := startProc(t, relayArgs(cfg)...)
	p.waitStreaming(t)

	w := newWriter(t, wdb, 20)
	var wmu sync.Mutex
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for i := range 60 {
			wmu.Lock()
			if i%3 == 0 {
				w.txn(400, true, true)
			} else {
				w.single()
				w.txn(100, false, true)
				w.txn(10, false, false)
			}
			wmu.Unlock()
			time.Sleep(40 * time.Millisecond)
		}
	}()
	topic := cfg.TopicPrefix + "orders"
	col := consume(t, env.Brokers, topic)
	for _, at := range []int{1500, 6000} {
		waitFor(t, 60*time.Second, "events flowing", func() bool { return col.len() >= at })
		p.kill(t)
		p = startProc(t, relayArgs(cfg)...)
	}
	<-writing
	wmu.Lock()
	committed := w.committed
	wmu.Unlock()
	dups := waitDistinct(t, col, committed, 2*time.Minute)
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		for rb := range w.rolledBack {
			if rb.String() == id {
				t.Fatalf("rolled-back event %s in Kafka", id)
			}
		}
	}
	t.Logf("%d committed events all in Kafka after 2 SIGKILLs; %d duplicates", len(committed), dups)
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0; stderr:\n%s", code, p.stderr.String())
	}
}

// TestSecondRelayWaitsAsStandby runs two relays on one slot: only one
// streams; after SIGKILL of the active one the standby takes over.
func TestSecondRelayWaitsAsStandby(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	a := startProc(t, relayArgs(cfg)...)
	a.waitStreaming(t)
	b := startRelay(t, cfg)
	waitFor(t, 30*time.Second, "relay B standby", func() bool { return b.State() == stateStandby })

	w := newWriter(t, db, 10)
	for range 5 {
		w.txn(100, false, true)
	}
	afterFirst := currentLSN(t, db)
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)
	waitFor(t, 30*time.Second, "slot confirmed", func() bool { return slotConfirmed(t, db, cfg.Slot) >= afterFirst })
	if s := b.State(); s != stateStandby {
		t.Fatalf("relay B is %s while A streams, want standby", s)
	}
	if err := b.ready(context.Background()); err != nil {
		t.Fatalf("a healthy standby is not ready: %v", err)
	}

	a.kill(t)
	killed := time.Now()
	waitFor(t, 20*time.Second, "relay B takes over", func() bool { return b.State() == stateStreaming })
	t.Logf("standby took over %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
	for range 5 {
		w.txn(100, false, true)
	}
	dups := waitDistinct(t, col, w.committed, 60*time.Second)
	if dups != 0 {
		t.Fatalf("%d duplicates although A had confirmed everything before it died", dups)
	}
	if err := b.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestConfigurationErrorExitsNonZero checks the contract's one-line error and
// exit status.
func TestConfigurationErrorExitsNonZero(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no brokers", []string{"cdc", "run", "--pg-url", "postgres://u:secret@localhost/db"}, "--kafka-brokers"},
		{"bad slot", []string{"cdc", "run", "--pg-url", "postgres://u:secret@localhost/db", "--kafka-brokers", "localhost:9092", "--slot", "Bad-Slot"}, "--slot"},
		{"no pg url", []string{"cdc", "run", "--kafka-brokers", "localhost:9092"}, "--pg-url"},
		{"bad compression", []string{"cdc", "run", "--pg-url", "postgres://u:secret@localhost/db", "--kafka-brokers", "localhost:9092", "--compression", "rar"}, "--compression"},
		{"republish without since", []string{"outbox", "republish", "--pg-url", "postgres://u:secret@localhost/db", "--kafka-brokers", "localhost:9092"}, "--since"},
	}
	bin := testenv.Binary(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = childproc.Env()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit = %v, want non-zero", err)
			}
			out := strings.TrimSpace(stderr.String())
			if strings.Count(out, "\n") != 0 || !strings.HasPrefix(out, "eventforge: ") || !strings.Contains(out, tt.want) {
				t.Fatalf("stderr %q: want one line naming %s", out, tt.want)
			}
			if strings.Contains(out, "secret") {
				t.Fatalf("stderr leaks the password: %q", out)
			}
		})
	}
}

// TestHealthAndMetricsEndpoints checks the wiring of `cdc run`: /readyz is
// ready while streaming and /metrics carries the contract's series.
func TestHealthAndMetricsEndpoints(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := relayArgs(cfg)
	for i, a := range args {
		if a == "--metrics-addr" {
			args[i+1] = addr
		}
	}
	p := startProc(t, args...)
	p.waitStreaming(t)
	newWriter(t, connect(t, url), 3).single()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, 30*time.Second, "/readyz ready", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	var body string
	waitFor(t, 30*time.Second, "an event published", func() bool {
		_, body = get("/metrics")
		return strings.Contains(body, `eventforge_cdc_events_published_total{topic="`+cfg.TopicPrefix+`orders"} 1`)
	})
	for _, name := range []string{"eventforge_cdc_publish_errors_total", "eventforge_cdc_confirmed_lsn", "eventforge_cdc_commit_to_ack_seconds_bucket",
		`eventforge_slot_lag_bytes{slot="` + cfg.Slot + `"}`, `eventforge_slot_retained_wal_bytes{slot="` + cfg.Slot + `"}`} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

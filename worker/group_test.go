package worker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// workerProc is an `eventforge worker run` subprocess.
type workerProc struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	err    error         // what Wait returned, once exited
}

// wait waits up to timeout for the process to exit and returns its Wait
// error; ok is false on timeout.
func (w *workerProc) wait(timeout time.Duration) (err error, ok bool) {
	select {
	case <-w.exited:
		return w.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

func startWorker(t *testing.T, f *fixture, handlers, name string, extra ...string) *workerProc {
	t.Helper()
	return startWorkerEnv(t, f, handlers, name, nil, extra...)
}

// startWorkerEnv starts a worker with extra environment variables.
func startWorkerEnv(t *testing.T, f *fixture, handlers, name string, env []string, extra ...string) *workerProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"worker", "run", "--group", f.group, "--topics", f.topic, "--handlers", handlers,
		"--session-timeout", "6s", "--commit-interval", "200ms", "--retry-backoff", "20ms", "--log-level", "info"}, extra...)
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append(cmd.Environ(), "EVENTFORGE_KAFKA_BROKERS="+strings.Join(f.brokers, ","), "EVENTFORGE_PG_URL="+f.dbURL)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		w.err = cmd.Wait()
		logFile.Close()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
		}
	})
	return w
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestWorkersKillAndRebalance: 10,000 order events, three worker processes
// in one group, one of them SIGKILLed mid-way and restarted. Every order is
// applied exactly once: one inbox row per event and an effect counter of 1
// on every order.
func TestWorkersKillAndRebalance(t *testing.T) {
	t.Parallel()
	const n = 10000
	f := newFixture(t, 6)
	ids := make([]string, n)
	evs := make([]*outbox.Event, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%05d", i)
		evs[i] = f.orderEvent(ids[i])
	}
	f.insertOrders(t, ids...)
	produce(t, f.brokers, evs...)
	handlers := filepath.Join(t.TempDir(), "orders.yaml")
	if err := os.WriteFile(handlers, []byte(countingYAML), 0o600); err != nil {
		t.Fatal(err)
	}

	processed := func() int { return f.count(t, `SELECT count(*) FROM processed_events`) }
	w1 := startWorker(t, f, handlers, "w1", "--batch-size", "1")
	w2 := startWorker(t, f, handlers, "w2", "--batch-size", "20")
	w3 := startWorker(t, f, handlers, "w3", "--batch-size", "1")
	waitFor(t, 60*time.Second, "a fifth of the events applied", func() bool { return processed() >= n/5 })
	if err := w2.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w2.exited
	atKill := processed()
	t.Logf("SIGKILLed w2 with %d of %d events applied", atKill, n)
	if atKill == n {
		t.Fatal("every event was applied before the kill: the test proves nothing; slow the workers down")
	}
	w2 = startWorker(t, f, handlers, "w2-restarted", "--batch-size", "20")

	waitFor(t, 120*time.Second, "every event applied", func() bool { return processed() == n })
	waitFor(t, 30*time.Second, "every offset committed", func() bool {
		var sum int64
		for p := range int32(6) {
			sum += max(committed(t, f.brokers, f.group, f.topic, p), 0)
		}
		return sum == n
	})
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1 AND status = 'processed'`); got != n {
		t.Errorf("%d of %d orders applied exactly once", got, n)
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount <> 1`); got != 0 {
		t.Errorf("%d orders applied zero or several times", got)
	}
	if ls := deadLetters(t, f.brokers, f.topic); len(ls) != 0 {
		t.Errorf("%d dead letters, want none", len(ls))
	}
	// A clean shutdown on SIGTERM exits 0.
	for _, w := range []*workerProc{w1, w2, w3} {
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range []*workerProc{w1, w2, w3} {
		err, ok := w.wait(30 * time.Second)
		switch {
		case !ok:
			t.Errorf("worker %d did not stop within 30s of SIGTERM", i+1)
		case err != nil:
			t.Errorf("worker %d exited with %v after SIGTERM, want status 0", i+1, err)
		}
	}
	b, _ := os.ReadFile(w2.log)
	t.Logf("restarted worker: %d joins", strings.Count(string(b), "joined consumer group"))
}

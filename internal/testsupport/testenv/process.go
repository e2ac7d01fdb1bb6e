package testenv

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartProcess starts cmd in the background with its output captured. At
// cleanup it sends stop (SIGTERM lets a program flush, as in production),
// kills it after grace, waits for it, and shows its output under name when
// the test failed.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd, stop os.Signal, grace time.Duration) {
	t.Helper()
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(stop)
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}

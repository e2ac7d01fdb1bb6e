package console

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestProcStartStopAndFailpointEnv(t *testing.T) {
	p := &proc{name: "sh", bin: "/bin/sh", args: []string{"-c", `echo "fp=$EVENTFORGE_FAILPOINTS other=$EVENTFORGE_OTHER"; exec sleep 30`}, logDir: t.TempDir()}
	t.Setenv("EVENTFORGE_OTHER", "leaks")
	if err := p.start("cdc/after-confirm=crash"); err != nil {
		t.Fatal(err)
	}
	if err := p.start(""); err == nil {
		t.Fatal("a second start of a running process succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.logContains("fp=cdc/after-confirm=crash other=\n") {
		if time.Now().After(deadline) {
			t.Fatalf("log %q: want the failpoint set and no other EVENTFORGE_ variable", p.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := p.status()
	if !st.Running || st.PID == 0 || st.Failpoint != "cdc/after-confirm=crash" || st.Starts != 1 {
		t.Fatalf("status %+v", st)
	}
	p.stop(5 * time.Second)
	if p.running() || p.done() != nil {
		t.Fatal("still running after stop")
	}
	if st := p.status(); !strings.Contains(st.LastExit, "signal") {
		t.Fatalf("last exit %q, want the signal", st.LastExit)
	}
}

func TestProcWaitExitAndReadiness(t *testing.T) {
	p := &proc{name: "quick", bin: "/bin/sh", args: []string{"-c", "echo bye; exit 3"}, logDir: t.TempDir(), readyAddr: "127.0.0.1:1"}
	if err := p.start(""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.waitReady(ctx); err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("waitReady of a process that exits: %v", err)
	}
	if err := p.waitExit(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.status(); st.Running || !strings.Contains(st.LastExit, "exit status 3") {
		t.Fatalf("status %+v", st)
	}
}

func TestHubFansOutAndCloses(t *testing.T) {
	h := newHub()
	a, cancelA := h.subscribe()
	b, _ := h.subscribe()
	h.publish("run", map[string]int{"n": 1})
	for _, ch := range []<-chan message{a, b} {
		m := <-ch
		if m.event != "run" || string(m.data) != `{"n":1}` {
			t.Fatalf("got %q %s", m.event, m.data)
		}
	}
	cancelA()
	if _, ok := <-a; ok {
		t.Fatal("a cancelled subscription still receives")
	}
	h.close()
	if _, ok := <-b; ok {
		t.Fatal("closing the hub left a subscription open")
	}
	if c, _ := h.subscribe(); c != nil {
		if _, ok := <-c; ok {
			t.Fatal("subscribing to a closed hub gives an open channel")
		}
	}
}

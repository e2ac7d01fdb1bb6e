package api

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestShutdownFinishesInFlightRequest cancels the server's context while a
// POST is between its two inserts: the listeners close at once, the POST
// still commits and answers 201, and serve returns nil.
func TestShutdownFinishesInFlightRequest(t *testing.T) {
	t.Parallel()
	g := newGateWriter()
	a := newTestAPI(t, func(s *pgStore, _ *Config) { s.w = g })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.srv.serve(ctx, ln, mln) }()

	base := "http://" + ln.Addr().String()
	if r := do(t, mustRequest(t, http.MethodGet, "http://"+mln.Addr().String()+"/metrics", "")); r.status != http.StatusOK {
		t.Fatalf("metrics listener: %d", r.status)
	}
	answer := make(chan reply, 1)
	go func() {
		answer <- do(t, mustRequest(t, http.MethodPost, base+"/orders", orderBody("inflight", "Ada", 1, "EUR")))
	}()
	<-g.entered
	cancel()
	waitRefused(t, ln.Addr().String())
	waitRefused(t, mln.Addr().String())
	close(g.release)

	if r := <-answer; r.status != http.StatusCreated {
		t.Fatalf("in-flight POST: %d %s, want 201", r.status, r.body)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v, want nil after a clean shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	if c := a.counts(t); c != (rowCounts{1, 1, 0}) {
		t.Fatalf("rows %+v, want the in-flight order committed", c)
	}
}

// waitRefused waits until addr refuses new connections.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections after shutdown began", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package cdc

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestReceiveBound(t *testing.T) {
	tests := []struct {
		name                        string
		configured, hb, status, wst time.Duration
		want                        time.Duration
	}{
		{"defaults", 0, 10 * time.Second, 10 * time.Second, time.Minute, time.Minute + silenceSlack},
		{"heartbeat dominates", 0, 30 * time.Second, 10 * time.Second, time.Minute, 90*time.Second + silenceSlack},
		{"heartbeat disabled, no server timeout", 0, -1, 10 * time.Second, 0, 30*time.Second + silenceSlack},
		{"configured", 3 * time.Second, 10 * time.Second, time.Second, time.Minute, 3 * time.Second},
		{"configured below two status intervals", time.Second, 10 * time.Second, 2 * time.Second, time.Minute, 4*time.Second + pollInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := receiveBound(tt.configured, tt.hb, tt.status, tt.wst); got != tt.want {
				t.Fatalf("receiveBound = %s, want %s", got, tt.want)
			}
		})
	}
}

// viaProxy is url with its host:port replaced by addr.
func viaProxy(t *testing.T, pgURL, addr string) (proxied, target string) {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	target = u.Host
	u.Host = addr
	return u.String(), target
}

// logBuffer is a logger writing to a buffer the test reads back.
func logBuffer(t *testing.T) (*slog.Logger, *testenv.Buffer) {
	t.Helper()
	buf := &testenv.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})), buf
}

// TestHalfOpenConnectionIsDetected freezes every connection between the
// relay and PostgreSQL without closing any (a half-open connection): the
// relay notices the silence within its receive timeout, logs it, turns
// not ready and, once the network is back, streams again without losing an
// event committed before, during or after the freeze.
func TestHalfOpenConnectionIsDetected(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	direct := env.NewDatabase(t)
	db := connect(t, direct)
	_, target := viaProxy(t, direct, "")
	proxy := testenv.StartProxy(t, target)
	proxied, _ := viaProxy(t, direct, proxy.Addr())
	cfg := testConfig(t, proxied, env.Brokers)
	cfg.ReceiveTimeout = 2 * time.Second
	cfg.HeartbeatInterval = 300 * time.Millisecond
	log, logs := logBuffer(t)
	r := startRelayLog(t, cfg, log)
	ready := func() bool { return r.ready(context.Background()) == nil }
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming && ready() })

	w := newWriter(t, db, 10)
	w.txn(50, false, true)
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)

	proxy.Freeze()
	frozen := time.Now()
	w.txn(50, false, true) // committed while the relay cannot hear about it
	waitFor(t, cfg.ReceiveTimeout+5*time.Second, "not ready after the freeze", func() bool { return !ready() })
	t.Logf("not ready %s after the freeze", time.Since(frozen).Round(time.Millisecond))
	waitFor(t, 5*time.Second, "the silence logged", func() bool { return strings.Contains(logs.String(), ErrServerSilent.Error()) })
	// Maintenance queries on the frozen connection give up too, instead of
	// hanging until the network is back.
	// Whichever maintenance query comes first (a heartbeat runs only while
	// streaming, and the session may already have ended) must fail.
	waitFor(t, cfg.ReceiveTimeout+5*time.Second, "a maintenance query failure logged", func() bool {
		l := logs.String()
		return strings.Contains(l, "heartbeat failed") || strings.Contains(l, "slot sampling failed") ||
			strings.Contains(l, "relay_state update failed")
	})
	// Reconnects give up on the frozen network too, and try again.
	sessions := metricValue(t, r, "eventforge_cdc_sessions_total")
	waitFor(t, 3*(cfg.ReceiveTimeout+cfg.ReconnectMax), "reconnect attempts that time out", func() bool {
		return metricValue(t, r, "eventforge_cdc_sessions_total") >= sessions+2
	})
	if ready() {
		t.Fatal("ready while every connection to PostgreSQL is frozen")
	}

	proxy.Thaw()
	waitFor(t, 60*time.Second, "streaming again", func() bool { return r.State() == stateStreaming && ready() })
	w.txn(50, false, true)
	waitDistinct(t, col, w.committed, 60*time.Second)
}

// TestIdleServerIsNotPresumedDead: with heartbeats off and an idle cluster
// the server sends nothing of its own accord, yet a live connection never
// reaches the receive timeout, because the relay's status updates ask for a
// reply after a status interval of silence.
func TestIdleServerIsNotPresumedDead(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	env := testenv.Shared(t)
	pg := testenv.StartPostgres(t) // quiet: no other database writes WAL
	cfg := testConfig(t, pg.URL(), env.Brokers)
	cfg.HeartbeatInterval = -1
	cfg.StateWriteInterval = time.Hour // its writes would bring WAL, and so messages
	cfg.ReceiveTimeout = 2 * time.Second
	log, logs := logBuffer(t)
	r := startRelayLog(t, cfg, log)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	time.Sleep(3 * cfg.ReceiveTimeout)
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 || strings.Contains(logs.String(), ErrServerSilent.Error()) {
		t.Fatalf("%v sessions failed on a live, idle connection", n)
	}
}

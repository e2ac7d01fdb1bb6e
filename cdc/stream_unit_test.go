package cdc

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/cdc/ack"
)

// scriptedConn is a replicationConn that hands out scripted messages in
// order, then reports read-deadline timeouts, and records every status
// update. It fakes the protocol seam only: the loop under test is the real
// stream.
type scriptedConn struct {
	mu       sync.Mutex
	script   []pgproto3.BackendMessage
	deadline time.Time
	receives int // ReceiveMessage calls
	statuses []pglogrepl.StandbyStatusUpdate
}

func (c *scriptedConn) ReceiveMessage(context.Context) (pgproto3.BackendMessage, error) {
	c.mu.Lock()
	c.receives++
	if len(c.script) > 0 {
		msg := c.script[0]
		c.script = c.script[1:]
		c.mu.Unlock()
		return msg, nil
	}
	wait := time.Until(c.deadline)
	c.mu.Unlock()
	time.Sleep(min(max(wait, time.Millisecond), pollInterval))
	return nil, errReceiveTimeout
}

func (c *scriptedConn) SendStandbyStatus(_ context.Context, u pglogrepl.StandbyStatusUpdate) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statuses = append(c.statuses, u)
	return nil
}

func (c *scriptedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return nil
}

func (c *scriptedConn) SetWriteDeadline(time.Time) error { return nil }

// sent returns the status updates so far and the number of receives.
func (c *scriptedConn) sent() ([]pglogrepl.StandbyStatusUpdate, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pglogrepl.StandbyStatusUpdate(nil), c.statuses...), c.receives
}

// keepalive is a primary keepalive message as the walsender sends it.
func keepalive(walEnd pglogrepl.LSN, reply bool) *pgproto3.CopyData {
	b := []byte{pglogrepl.PrimaryKeepaliveMessageByteID}
	b = binary.BigEndian.AppendUint64(b, uint64(walEnd))
	b = binary.BigEndian.AppendUint64(b, 0) // server time
	if reply {
		return &pgproto3.CopyData{Data: append(b, 1)}
	}
	return &pgproto3.CopyData{Data: append(b, 0)}
}

const unitStart pglogrepl.LSN = 0x10

// newUnitStream is a stream from unitStart on conn and tr, sending a status
// update every interval.
func newUnitStream(t *testing.T, conn replicationConn, tr *ack.Tracker, interval, shutdown time.Duration) *stream {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry(), "unit")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ShutdownTimeout = shutdown
	return &stream{cfg: &cfg, log: slog.New(slog.DiscardHandler), m: m, conn: conn, tr: tr,
		feed: make(chan *pending, 16), interval: interval, start: unitStart, sent: unitStart,
		confirm: func(pglogrepl.LSN) {}}
}

// runStream runs s until stop ends and returns its result on the channel.
func runStream(stop, ctx context.Context, s *stream) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.run(stop, ctx) }()
	return done
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// flushes is the flush position of each update, checking that write and
// apply equal it (pglogrepl would otherwise fill them from write).
func flushes(t *testing.T, us []pglogrepl.StandbyStatusUpdate) []pglogrepl.LSN {
	t.Helper()
	out := make([]pglogrepl.LSN, len(us))
	for i, u := range us {
		if u.WALWritePosition != u.WALFlushPosition || u.WALApplyPosition != u.WALFlushPosition {
			t.Fatalf("status %d: write %s, flush %s, apply %s; want all equal", i, u.WALWritePosition, u.WALFlushPosition, u.WALApplyPosition)
		}
		out[i] = u.WALFlushPosition
	}
	return out
}

// TestStreamAnswersKeepalives: a keepalive that asks for a reply is answered
// at once (the status interval is an hour here), one that does not is not;
// an idle stream confirms the server's WAL end, one with an event in flight
// only what is acked (docs/design.md#status-cadence, #flush-confirms).
func TestStreamAnswersKeepalives(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool
		want     pglogrepl.LSN
	}{
		{"idle confirms the server's WAL end", false, 0x100},
		{"in flight confirms the start only", true, unitStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := ack.New(8, 1<<20)
			if tc.inFlight {
				tr.Begin()
				tr.Add(10)
			}
			conn := &scriptedConn{script: []pgproto3.BackendMessage{keepalive(0x50, false), keepalive(0x100, true)}}
			stop, cancel := context.WithCancel(t.Context())
			done := runStream(stop, t.Context(), newUnitStream(t, conn, tr, time.Hour, time.Millisecond))
			waitUntil(t, "the keepalive's reply", func() bool { us, _ := conn.sent(); return len(us) >= 2 })
			_, receives := conn.sent()
			waitUntil(t, "a receive after the script", func() bool { _, n := conn.sent(); return n > receives })
			us, _ := conn.sent()
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
			got := flushes(t, us)
			if len(got) != 2 || got[0] != unitStart || got[1] != tc.want {
				t.Fatalf("status updates before stopping confirm %v, want [%s %s]: the start, then one reply to the keepalive that asked", got, unitStart, tc.want)
			}
			if us[1].ReplyRequested {
				t.Error("the reply asked the server for a reply although it just spoke")
			}
		})
	}
}

// TestStreamWindowFullKeepsConfirmingWithoutReading: while the in-flight
// window is full the stream reads nothing and still sends status updates on
// schedule, confirming no more than is acked; once the ack frees the window
// it reads again and, idle, confirms the keepalive's WAL end
// (docs/design.md#bounded-memory, #status-cadence).
func TestStreamWindowFullKeepsConfirmingWithoutReading(t *testing.T) {
	tr := ack.New(1, 1<<20)
	tr.Begin()
	tok := tr.Add(10)
	tr.Commit(0x200)
	conn := &scriptedConn{script: []pgproto3.BackendMessage{keepalive(0x300, false)}}
	stop, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runStream(stop, t.Context(), newUnitStream(t, conn, tr, 10*time.Millisecond, time.Millisecond))

	waitUntil(t, "status updates while the window is full", func() bool { us, _ := conn.sent(); return len(us) >= 4 })
	us, receives := conn.sent()
	if receives != 0 {
		t.Fatalf("%d receives with the window full, want none", receives)
	}
	for i, pos := range flushes(t, us) {
		if pos != unitStart {
			t.Fatalf("status %d confirms %s with the only transaction unacked, want %s", i, pos, unitStart)
		}
	}

	tr.Ack(tok)
	waitUntil(t, "the acked transaction confirmed and the keepalive read", func() bool {
		us, n := conn.sent()
		return n > 0 && us[len(us)-1].WALFlushPosition == 0x300
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestStreamDrain: at shutdown the stream waits for in-flight acks, reading
// nothing and confirming on schedule, then confirms what was acked last; past
// the shutdown timeout it gives up without confirming the unacked
// transaction (docs/design.md#flush-confirms).
func TestStreamDrain(t *testing.T) {
	for _, tc := range []struct {
		name string
		ack  bool
		want pglogrepl.LSN
	}{
		{"acked in time: confirms the transaction", true, 0x200},
		{"timeout: confirms only the start", false, unitStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := ack.New(8, 1<<20)
			tr.Begin()
			tok := tr.Add(10)
			tr.Commit(0x200)
			shutdown := 50 * time.Millisecond
			if tc.ack {
				shutdown = time.Minute
			}
			conn := &scriptedConn{script: []pgproto3.BackendMessage{keepalive(0x300, true)}}
			stop, cancel := context.WithCancel(t.Context())
			cancel() // shutting down from the start
			done := runStream(stop, t.Context(), newUnitStream(t, conn, tr, 10*time.Millisecond, shutdown))
			if tc.ack {
				waitUntil(t, "status updates while draining", func() bool { us, _ := conn.sent(); return len(us) >= 3 })
				tr.Ack(tok)
			}
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
			us, receives := conn.sent()
			if receives != 0 {
				t.Errorf("%d receives while draining, want none", receives)
			}
			got := flushes(t, us)
			for i, pos := range got[:len(got)-1] {
				if pos != unitStart {
					t.Fatalf("status %d confirms %s before the ack, want %s", i, pos, unitStart)
				}
			}
			if last := got[len(got)-1]; last != tc.want {
				t.Fatalf("last status confirms %s, want %s", last, tc.want)
			}
		})
	}
}

// TestStreamEndsTheSession: a server error, the end of the copy stream and a
// silent server each end the session with an error that says which.
func TestStreamEndsTheSession(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  []pgproto3.BackendMessage
		silence time.Duration
		check   func(error) bool
	}{
		{"server error", []pgproto3.BackendMessage{&pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P01", Message: "terminating"}}, 0,
			func(err error) bool { var pe *pgconn.PgError; return errors.As(err, &pe) && pe.Code == "57P01" }},
		{"copy done", []pgproto3.BackendMessage{&pgproto3.CopyDone{}}, 0,
			func(err error) bool { return err != nil && err.Error() == "server ended the replication stream" }},
		{"silent server", nil, 30 * time.Millisecond,
			func(err error) bool { return errors.Is(err, ErrServerSilent) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &scriptedConn{script: tc.script}
			s := newUnitStream(t, conn, ack.New(8, 1<<20), time.Hour, time.Millisecond)
			s.silence = tc.silence
			err := <-runStream(t.Context(), t.Context(), s)
			if !tc.check(err) {
				t.Fatalf("run = %v", err)
			}
		})
	}
}

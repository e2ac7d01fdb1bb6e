package ack

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// step is one call on a Tracker in a scripted test.
type step struct {
	op   byte // 'b' Begin, 'a' Add, 'c' Commit, 'k' Ack
	arg  int  // Add: size; Commit: end LSN; Ack: index of the token (in Add order)
	want pglogrepl.LSN
}

func b() step                                 { return step{op: 'b'} }
func add(size int) step                       { return step{op: 'a', arg: size} }
func commit(end int, want pglogrepl.LSN) step { return step{op: 'c', arg: end, want: want} }
func ackN(i int, want pglogrepl.LSN) step     { return step{op: 'k', arg: i, want: want} }

// TestWatermark scripts Begin/Add/Commit/Ack sequences and checks the
// watermark after every Commit and Ack.
func TestWatermark(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing completes before commit", []step{
			b(), add(1), ackN(0, 0), commit(100, 100)}},
		{"acks within a transaction in any order", []step{
			b(), add(1), add(1), add(1), commit(100, 0),
			ackN(2, 0), ackN(0, 0), ackN(1, 100)}},
		{"later transaction acked first waits", []step{
			b(), add(1), commit(100, 0),
			b(), add(1), commit(200, 0),
			ackN(1, 0), ackN(0, 200)}},
		{"out of order across three", []step{
			b(), add(1), add(1), commit(100, 0),
			b(), add(1), commit(200, 0),
			b(), add(1), commit(300, 0),
			ackN(3, 0), ackN(0, 0), ackN(2, 0), ackN(1, 300)}},
		{"prefix stops at the first incomplete", []step{
			b(), add(1), commit(100, 0),
			b(), add(1), commit(200, 0),
			b(), add(1), commit(300, 0),
			ackN(0, 100), ackN(2, 100), ackN(1, 300)}},
		{"empty transaction alone completes at once", []step{
			b(), commit(100, 100), b(), commit(150, 150)}},
		{"empty transaction waits for the one before", []step{
			b(), add(1), commit(100, 0),
			b(), commit(150, 0),
			b(), commit(160, 0),
			ackN(0, 160)}},
		{"empty transaction after an incomplete then a full one", []step{
			b(), add(1), commit(100, 0),
			b(), commit(150, 0),
			b(), add(1), commit(200, 0),
			ackN(0, 150), ackN(1, 200)}},
		{"acked before commit, behind an open one", []step{
			b(), add(1), ackN(0, 0), commit(100, 100),
			b(), add(1), add(1), ackN(2, 100), ackN(1, 100), commit(200, 200)}},
		{"watermark never passes the open transaction", []step{
			b(), add(1), commit(100, 0),
			b(), add(1), ackN(1, 0), ackN(0, 100),
			commit(200, 200)}},
		{"shared end LSN: never past an incomplete one", []step{
			b(), add(1), commit(100, 0),
			b(), add(1), commit(100, 0),
			ackN(1, 0), ackN(0, 100)}},
		{"end LSN going backwards never moves the watermark back", []step{
			b(), add(1), commit(300, 0), ackN(0, 300),
			b(), add(1), commit(200, 300), ackN(1, 300),
			b(), commit(100, 300),
			b(), add(1), commit(400, 300), ackN(2, 400)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(1000, 1<<20)
			var toks []Token
			for i, s := range tc.steps {
				switch s.op {
				case 'b':
					tr.Begin()
				case 'a':
					toks = append(toks, tr.Add(s.arg))
					continue
				case 'c':
					tr.Commit(pglogrepl.LSN(s.arg))
				case 'k':
					tr.Ack(toks[s.arg])
				}
				if s.op != 'b' {
					if got := tr.Watermark(); got != s.want {
						t.Fatalf("step %d (%c %d): watermark %d, want %d", i, s.op, s.arg, got, s.want)
					}
				}
			}
			if !tr.Idle() || tr.Pending() != 0 {
				ev, by := tr.InFlight()
				t.Fatalf("not idle at the end: %d events, %d bytes, %d pending", ev, by, tr.Pending())
			}
		})
	}
}

func TestHasRoom(t *testing.T) {
	tests := []struct {
		name       string
		maxEvents  int
		maxBytes   int64
		sizes      []int // events added to one open transaction
		want       bool
		wantEvents int
		wantBytes  int64
	}{
		{"empty", 2, 100, nil, true, 0, 0},
		{"below both", 3, 100, []int{10, 10}, true, 2, 20},
		{"events full", 2, 100, []int{10, 10}, false, 2, 20},
		{"bytes full", 10, 100, []int{60, 40}, false, 2, 100},
		{"bytes over", 10, 100, []int{150}, false, 1, 150},
		{"bytes just below", 10, 100, []int{99}, true, 1, 99},
		{"negative size counts as zero", 10, 100, []int{-5}, true, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.maxEvents, tc.maxBytes)
			tr.Begin()
			var toks []Token
			for _, s := range tc.sizes {
				toks = append(toks, tr.Add(s))
			}
			if got := tr.HasRoom(); got != tc.want {
				t.Errorf("HasRoom = %v, want %v", got, tc.want)
			}
			if ev, by := tr.InFlight(); ev != tc.wantEvents || by != tc.wantBytes {
				t.Errorf("InFlight = %d, %d; want %d, %d", ev, by, tc.wantEvents, tc.wantBytes)
			}
			for _, tok := range toks {
				tr.Ack(tok)
			}
			if !tr.HasRoom() {
				t.Error("no room once everything is acked")
			}
			if ev, by := tr.InFlight(); ev != 0 || by != 0 {
				t.Errorf("InFlight after acks = %d, %d", ev, by)
			}
		})
	}
}

// TestOversizedEventPassesAnEmptyWindow: an event larger than maxBytes must
// not block the relay forever.
func TestOversizedEventPassesAnEmptyWindow(t *testing.T) {
	tr := New(10, 100)
	tr.Begin()
	if !tr.HasRoom() {
		t.Fatal("empty window has no room")
	}
	tok := tr.Add(1 << 20)
	if tr.HasRoom() {
		t.Fatal("room with 1 MiB in flight and a 100-byte window")
	}
	tr.Ack(tok)
	if !tr.HasRoom() {
		t.Fatal("no room after the ack")
	}
}

// TestPendingTransactionsBounded: acks completing out of order behind a
// slow first event may not grow the bookkeeping past the window.
func TestPendingTransactionsBounded(t *testing.T) {
	tr := New(4, 1<<20)
	tr.Begin()
	slow := tr.Add(1)
	tr.Commit(10)
	n := 0
	for tr.HasRoom() {
		n++
		tr.Begin()
		tr.Ack(tr.Add(1)) // acked at once, but behind slow
		tr.Commit(pglogrepl.LSN(10 + n))
		if n > 100 {
			t.Fatal("HasRoom never false: pending transactions unbounded")
		}
	}
	if tr.Pending() != 4 || n != 3 {
		t.Fatalf("stopped at %d pending after %d transactions, want 4 after 3", tr.Pending(), n)
	}
	tr.Ack(slow)
	if got := tr.Watermark(); got != pglogrepl.LSN(10+n) {
		t.Fatalf("watermark %d, want %d", got, 10+n)
	}
	if tr.Pending() != 0 || !tr.HasRoom() {
		t.Fatalf("pending %d after the slow ack", tr.Pending())
	}
}

// TestLargeTransactionIsOneEntry: a million-row transaction is one entry
// and a counter (docs/design.md#bounded-memory).
func TestLargeTransactionIsOneEntry(t *testing.T) {
	tr := New(100, 1<<20)
	tr.Begin()
	window := make([]Token, 0, 100)
	for range 1_000_000 {
		if !tr.HasRoom() {
			for _, tok := range window {
				tr.Ack(tok)
			}
			window = window[:0]
		}
		window = append(window, tr.Add(50))
	}
	if tr.Pending() != 1 || len(tr.ring) != initialRing {
		t.Fatalf("pending %d, ring %d: want one entry in the initial ring", tr.Pending(), len(tr.ring))
	}
	tr.Commit(1 << 30)
	for _, tok := range window {
		if tr.Watermark() != 0 {
			t.Fatal("watermark moved with events in flight")
		}
		tr.Ack(tok)
	}
	if tr.Watermark() != 1<<30 || !tr.Idle() {
		t.Fatalf("watermark %d idle %v", tr.Watermark(), tr.Idle())
	}
}

func TestRingGrowsAndKeepsOrder(t *testing.T) {
	tr := New(1000, 1<<20)
	var toks []Token
	for i := 1; i <= 100; i++ { // more than initialRing pending transactions
		tr.Begin()
		toks = append(toks, tr.Add(1))
		tr.Commit(pglogrepl.LSN(i))
	}
	for i := len(toks) - 1; i >= 1; i-- {
		tr.Ack(toks[i])
	}
	if tr.Watermark() != 0 || tr.Pending() != 100 {
		t.Fatalf("watermark %d pending %d before the first ack", tr.Watermark(), tr.Pending())
	}
	tr.Ack(toks[0])
	if tr.Watermark() != 100 || !tr.Idle() {
		t.Fatalf("watermark %d idle %v", tr.Watermark(), tr.Idle())
	}
}

func TestChangedSignalledAfterAck(t *testing.T) {
	tr := New(10, 100)
	select {
	case <-tr.Changed():
		t.Fatal("signalled before any ack")
	default:
	}
	tr.Begin()
	a, c := tr.Add(1), tr.Add(1)
	tr.Commit(5)
	select {
	case <-tr.Changed():
		t.Fatal("signalled by Add/Commit")
	default:
	}
	tr.Ack(a)
	tr.Ack(c) // a second ack must not block on the full channel
	select {
	case <-tr.Changed():
	default:
		t.Fatal("not signalled after acks")
	}
	select {
	case <-tr.Changed():
		t.Fatal("two acks gave two signals; cap must be 1")
	default:
	}
}

func TestIdle(t *testing.T) {
	tr := New(10, 100)
	if !tr.Idle() {
		t.Fatal("new tracker not idle")
	}
	tr.Begin()
	if tr.Idle() {
		t.Fatal("idle with an open transaction")
	}
	tok := tr.Add(1)
	tr.Commit(9)
	if tr.Idle() {
		t.Fatal("idle with an event in flight")
	}
	tr.Ack(tok)
	if !tr.Idle() {
		t.Fatal("not idle after the last ack")
	}
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(tr *Tracker)
	}{
		{"begin twice", func(tr *Tracker) { tr.Begin(); tr.Begin() }},
		{"add without begin", func(tr *Tracker) { tr.Add(1) }},
		{"commit without begin", func(tr *Tracker) { tr.Commit(1) }},
		{"zero token", func(tr *Tracker) { tr.Ack(Token{}) }},
		{"double ack", func(tr *Tracker) {
			tr.Begin()
			tok := tr.Add(1)
			tr.Ack(tok)
			tr.Ack(tok)
		}},
		{"ack after drop", func(tr *Tracker) {
			tr.Begin()
			tok := tr.Add(1)
			tr.Commit(1)
			tr.Ack(tok)
			tr.Ack(tok)
		}},
		{"token from another tracker", func(tr *Tracker) {
			other := New(1, 1)
			other.Begin()
			tr.Ack(other.Add(1))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f(New(10, 100))
		})
	}
	for _, w := range [][2]int64{{0, 1}, {1, 0}, {-1, 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d, %d) did not panic", w[0], w[1])
				}
			}()
			New(int(w[0]), w[1])
		}()
	}
}

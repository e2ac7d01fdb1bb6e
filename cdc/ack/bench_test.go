package ack

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// BenchmarkTrackerAddAck measures the per-event bookkeeping; it must not
// allocate in steady state.
func BenchmarkTrackerAddAck(b *testing.B) {
	// One event per transaction, acked at once: Begin, Add, Commit, Ack, Watermark.
	b.Run("txn", func(b *testing.B) {
		tr := New(1000, 1<<20)
		var end pglogrepl.LSN
		b.ReportAllocs()
		for b.Loop() {
			end++
			tr.Begin()
			tok := tr.Add(200)
			tr.Commit(end)
			tr.Ack(tok)
			if tr.Watermark() != end {
				b.Fatal("watermark behind")
			}
		}
	})
	// A window of 512 events across 8-event transactions, acked in the
	// order they were added, 512 behind.
	b.Run("window", func(b *testing.B) {
		const window = 512
		tr := New(window+1, 1<<30)
		ring := make([]Token, window)
		var end pglogrepl.LSN
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			if n%8 == 0 {
				if n > 0 {
					end++
					tr.Commit(end)
				}
				tr.Begin()
			}
			if n >= window {
				tr.Ack(ring[n%window])
			}
			ring[n%window] = tr.Add(200)
			n++
		}
	})
	// Acks from another goroutine, as in the relay.
	b.Run("parallel", func(b *testing.B) {
		tr := New(1024, 1<<30)
		toks := make(chan Token, 1024)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for tok := range toks {
				tr.Ack(tok)
			}
		}()
		var end pglogrepl.LSN
		b.ReportAllocs()
		for b.Loop() {
			for !tr.HasRoom() {
				<-tr.Changed()
			}
			end++
			tr.Begin()
			toks <- tr.Add(200)
			tr.Commit(end)
		}
		close(toks)
		<-done
	})
}

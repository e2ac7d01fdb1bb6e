package ack

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"golang.org/x/sync/errgroup"
)

// TestConcurrentAcks runs the relay's shape: one goroutine reads
// transactions, waits for room on Changed and watches the watermark; several
// goroutines ack in whatever order they are scheduled. The watermark must
// never decrease, never pass a transaction with events in flight, and end at
// the last commit.
func TestConcurrentAcks(t *testing.T) {
	const (
		txns    = 3000
		ackers  = 8
		maxEvts = 64
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := New(maxEvts, 16<<10)
	toks := make(chan Token, 1024)

	// acked[i] counts acked events of transaction i; ends[i] is its end.
	var mu sync.Mutex
	acked := make([]int, txns)
	sizes := make([]int, txns)
	seqTxn := map[uint64]int{} // token seq -> transaction index

	g, gctx := errgroup.WithContext(ctx)
	var ackWG sync.WaitGroup
	for range ackers {
		ackWG.Add(1)
		g.Go(func() error {
			defer ackWG.Done()
			rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
			// Hold a few tokens and ack them out of order, but never sit on
			// them while no new token comes: a producer always flushes.
			var hold []Token
			ackRandom := func() {
				i := rng.IntN(len(hold))
				ackOne(tr, hold[i], &mu, acked, seqTxn)
				hold = append(hold[:i], hold[i+1:]...)
			}
			for {
				var tok Token
				var ok bool
				if len(hold) > 0 {
					select {
					case tok, ok = <-toks:
					default:
						ackRandom()
						continue
					}
				} else {
					tok, ok = <-toks
				}
				if !ok {
					break
				}
				hold = append(hold, tok)
				if len(hold) >= 4 || rng.IntN(3) == 0 {
					ackRandom()
				}
			}
			for len(hold) > 0 {
				ackRandom()
			}
			return nil
		})
	}

	g.Go(func() error {
		defer close(toks)
		rng := rand.New(rand.NewPCG(7, 8))
		for i := range txns {
			tr.Begin()
			n := rng.IntN(6) // some empty transactions, like heartbeats
			sizes[i] = n
			for range n {
				for !tr.HasRoom() {
					select {
					case <-tr.Changed():
					case <-time.After(10 * time.Millisecond): // a status-update tick
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				mu.Lock()
				tok := tr.Add(100 + rng.IntN(400))
				seqTxn[tok.seq] = i
				mu.Unlock()
				toks <- tok
			}
			tr.Commit(pglogrepl.LSN((i + 1) * 100))
			checkWatermark(t, tr, &mu, acked, sizes[:i+1])
		}
		return nil
	})

	// A watcher that only reads, as a metrics scrape would.
	stop := make(chan struct{})
	var watch errgroup.Group
	watch.Go(func() error {
		var prev pglogrepl.LSN
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			w := tr.Watermark()
			if w < prev {
				t.Errorf("watermark went back from %d to %d", prev, w)
				return nil
			}
			prev = w
		}
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	ackWG.Wait()
	close(stop)
	_ = watch.Wait()
	if got := tr.Watermark(); got != txns*100 {
		t.Fatalf("final watermark %d, want %d", got, txns*100)
	}
	if !tr.Idle() || tr.Pending() != 0 {
		t.Fatalf("not idle at the end (pending %d)", tr.Pending())
	}
}

func ackOne(tr *Tracker, tok Token, mu *sync.Mutex, acked []int, seqTxn map[uint64]int) {
	mu.Lock()
	acked[seqTxn[tok.seq]]++
	mu.Unlock()
	tr.Ack(tok)
}

// checkWatermark asserts the watermark does not pass a transaction whose
// events were not all acked when it was read. Acks recorded in acked happen
// before the tracker sees them, so the check errs only on the safe side.
func checkWatermark(t *testing.T, tr *Tracker, mu *sync.Mutex, acked, sizes []int) {
	mu.Lock()
	defer mu.Unlock()
	w := tr.Watermark()
	for i, n := range sizes {
		if acked[i] < n && pglogrepl.LSN((i+1)*100) <= w {
			t.Errorf("watermark %d passes transaction %d with %d of %d events acked", w, i, acked[i], n)
			return
		}
	}
}

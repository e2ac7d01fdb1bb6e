package ack

import (
	"math/rand/v2"
	"testing"

	"github.com/jackc/pglogrepl"
)

// model is the obvious, unbounded version of the tracker: every transaction
// in a slice, every event counted, the watermark recomputed from scratch.
type model struct {
	txns      []mtxn
	open      bool
	watermark pglogrepl.LSN // max over time, so it never goes backwards
}

type mtxn struct {
	end           pglogrepl.LSN
	events, acked int
	bytes, ackedB int64
	committed     bool
}

// prefix is the length of the longest prefix of complete transactions.
func (m *model) prefix() int {
	for i, tx := range m.txns {
		if !tx.committed || tx.acked < tx.events {
			return i
		}
	}
	return len(m.txns)
}

func (m *model) update() {
	p := m.prefix()
	for _, tx := range m.txns[:p] {
		m.watermark = max(m.watermark, tx.end)
	}
}

func (m *model) inFlight() (events int, bytes int64) {
	for _, tx := range m.txns {
		events += tx.events - tx.acked
		bytes += tx.bytes - tx.ackedB
	}
	return events, bytes
}

// pending counts the transactions with events past the complete prefix.
func (m *model) pending() int {
	n := 0
	for _, tx := range m.txns[m.prefix():] {
		if tx.events > 0 {
			n++
		}
	}
	return n
}

// mtoken is an in-flight event of the model: its transaction and the
// tracker's token.
type mtoken struct {
	txn  int
	size int64
	tok  Token
}

// runModel drives a Tracker and the model with the same operations, chosen
// by the bytes of ops, and compares them after each.
func runModel(t *testing.T, ops []byte, maxEvents int, maxBytes int64) {
	tr := New(maxEvents, maxBytes)
	var m model
	var flying []mtoken
	var lastEnd pglogrepl.LSN
	next := func() byte {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return b
	}
	for len(ops) > 0 {
		op := next()
		switch op % 4 {
		case 0:
			if m.open {
				continue
			}
			tr.Begin()
			m.open = true
			m.txns = append(m.txns, mtxn{})
		case 1:
			if !m.open {
				continue
			}
			size := int64(next())
			cur := &m.txns[len(m.txns)-1]
			cur.events++
			cur.bytes += size
			flying = append(flying, mtoken{txn: len(m.txns) - 1, size: size, tok: tr.Add(int(size))})
		case 2:
			if !m.open {
				continue
			}
			// Mostly increasing ends, sometimes equal (step 0) or lower
			// (high bit): the tracker must stay monotonic regardless.
			step := next()
			end := lastEnd + pglogrepl.LSN(step&0x7f)
			if step&0x80 != 0 && lastEnd > 10 {
				end = lastEnd - 10
			}
			lastEnd = end
			tr.Commit(end)
			m.open = false
			cur := &m.txns[len(m.txns)-1]
			cur.end, cur.committed = end, true
		case 3:
			if len(flying) == 0 {
				continue
			}
			i := int(next()) % len(flying)
			ft := flying[i]
			flying[i] = flying[len(flying)-1]
			flying = flying[:len(flying)-1]
			tr.Ack(ft.tok)
			m.txns[ft.txn].acked++
			m.txns[ft.txn].ackedB += ft.size
			select {
			case <-tr.Changed():
			default:
				t.Fatal("Ack did not signal Changed")
			}
		}
		before := m.watermark
		m.update()
		if m.watermark < before {
			t.Fatal("model watermark went backwards")
		}
		compare(t, tr, &m, maxEvents, maxBytes)
	}
}

func compare(t *testing.T, tr *Tracker, m *model, maxEvents int, maxBytes int64) {
	t.Helper()
	if got := tr.Watermark(); got != m.watermark {
		t.Fatalf("watermark %d, model %d", got, m.watermark)
	}
	ev, by := m.inFlight()
	if gev, gby := tr.InFlight(); gev != ev || gby != by {
		t.Fatalf("in flight %d/%d, model %d/%d", gev, gby, ev, by)
	}
	if got, want := tr.Pending(), m.pending(); got != want {
		t.Fatalf("pending %d, model %d", got, want)
	}
	room := ev == 0 || (ev < maxEvents && by < maxBytes && m.pending() < maxEvents)
	if got := tr.HasRoom(); got != room {
		t.Fatalf("HasRoom %v, model %v (events %d bytes %d pending %d)", got, room, ev, by, m.pending())
	}
	if got, want := tr.Idle(), !m.open && ev == 0; got != want {
		t.Fatalf("Idle %v, model %v", got, want)
	}
}

// FuzzTracker checks random interleavings of Begin/Add/Commit/Ack against
// the model: the watermark is the end LSN of the longest prefix whose events
// are all acked.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 1, 5, 2, 10, 3, 0}, uint8(3), uint16(100))
	f.Add([]byte{0, 1, 1, 1, 1, 2, 5, 0, 2, 6, 0, 1, 9, 2, 0x85, 3, 1, 3, 0, 3, 0}, uint8(2), uint16(8))
	f.Add([]byte{0, 2, 0, 0, 1, 200, 3, 0, 2, 3}, uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, ops []byte, maxEvents uint8, maxBytes uint16) {
		runModel(t, ops, int(maxEvents)+1, int64(maxBytes)+1)
	})
}

// TestTrackerMatchesModel runs long random sequences through the model, so
// plain `go test` covers more than the fuzz seeds.
func TestTrackerMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		ops := make([]byte, 200+rng.IntN(2000))
		for j := range ops {
			ops[j] = byte(rng.Uint32())
		}
		maxEvents := 1 + rng.IntN(40)
		maxBytes := int64(1 + rng.IntN(5000))
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("run %d: maxEvents %d maxBytes %d", i, maxEvents, maxBytes)
				}
			}()
			runModel(t, ops, maxEvents, maxBytes)
		})
	}
}

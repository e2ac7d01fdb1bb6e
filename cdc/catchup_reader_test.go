package cdc

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// chunks is a reader that returns its chunks one per read.
type chunks struct{ parts [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts = c.parts[1:]
	return n, nil
}

func TestCatchUpReaderPausesOnlyAfterShortReadsWhileCatchingUp(t *testing.T) {
	small, full := []byte("ab"), bytes.Repeat([]byte("x"), catchUpShortRead)
	cases := []struct {
		name     string
		catchUp  bool
		parts    [][]byte
		wantWait int
	}{
		{"live: never pauses", false, [][]byte{small, small, small}, 0},
		{"catching up: pauses after each short read", true, [][]byte{small, small, small}, 2},
		{"catching up: full reads go on at once", true, [][]byte{full, full, small, full}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var on atomic.Bool
			on.Store(tc.catchUp)
			waits := 0
			r := &catchUpReader{r: &chunks{parts: tc.parts}, catchUp: &on, pause: func(d time.Duration) {
				if d != catchUpReadPause {
					t.Fatalf("pause %v", d)
				}
				waits++
			}}
			buf := make([]byte, 2*catchUpShortRead)
			for range tc.parts {
				if _, err := r.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			if waits != tc.wantWait {
				t.Fatalf("paused %d times, want %d", waits, tc.wantWait)
			}
		})
	}
}

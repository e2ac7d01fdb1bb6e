package testenv

import (
	"bytes"
	"sync"
)

// Buffer collects output written from several goroutines (a subprocess's
// stdout and stderr, a logger shared by handlers) and reads it back whole.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

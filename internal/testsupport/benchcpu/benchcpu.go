// Package benchcpu reports a benchmark's CPU time per operation, the
// process's user and system time (garbage collection included), next to the
// wall-clock ns/op that a machine shared with other work inflates.
//
// Imports (test support, for _test files and tools only): no other
// EventForge package.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Clock is the process's CPU time when a measurement began.
type Clock struct{ start time.Duration }

// Start begins a measurement.
func Start() Clock { return Clock{start: used()} }

// Report adds "cpu-ns/op" to b's results: the CPU time since Start over
// b.N operations, and "cpu-ns/<unit>" over b.N*per of them when per > 1.
func (c Clock) Report(b *testing.B, per int, unit string) {
	b.Helper()
	d := float64(used() - c.start)
	b.ReportMetric(d/float64(b.N), "cpu-ns/op")
	if per > 1 {
		b.ReportMetric(d/float64(b.N*per), "cpu-ns/"+unit)
	}
}

// used is the process's user and system CPU time so far.
func used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

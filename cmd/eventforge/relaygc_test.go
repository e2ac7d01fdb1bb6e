package main

import (
	"runtime/debug"
	"testing"
)

// TestRelayGCKeepsAnOperatorsGOGC: the relay's GC target applies only when
// GOGC is unset.
func TestRelayGCKeepsAnOperatorsGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	for _, tc := range []struct {
		gogc string
		want int
	}{
		{"", relayGCPercent},
		{"200", 100}, // set by the operator: left as the runtime read it
	} {
		debug.SetGCPercent(100)
		relayGC(tc.gogc)
		if got := debug.SetGCPercent(100); got != tc.want {
			t.Errorf("relayGC(%q): GC percent %d, want %d", tc.gogc, got, tc.want)
		}
	}
}

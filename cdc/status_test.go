package cdc

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/cdc/ack"
)

// TestStatusDue checks when the stream sends a status update: on schedule,
// or early once acks moved the watermark past what was sent, but not more
// often than ackedStatusGap.
func TestStatusDue(t *testing.T) {
	now := time.Now()
	acked := func(tr *ack.Tracker) {
		tr.Begin()
		tr.Ack(tr.Add(10))
		tr.Commit(300)
	}
	unacked := func(tr *ack.Tracker) {
		tr.Begin()
		tr.Add(10)
		tr.Commit(300)
	}
	for _, tc := range []struct {
		name       string
		sent       pglogrepl.LSN
		lastStatus time.Time
		nextStatus time.Time
		setup      func(*ack.Tracker)
		want       bool
	}{
		{"on schedule", 100, now.Add(-time.Second), now, func(*ack.Tracker) {}, true},
		{"nothing new", 100, now.Add(-time.Second), now.Add(time.Second), func(*ack.Tracker) {}, false},
		{"watermark moved", 100, now.Add(-ackedStatusGap), now.Add(time.Second), acked, true},
		{"watermark moved, too soon", 100, now.Add(-ackedStatusGap / 2), now.Add(time.Second), acked, false},
		{"watermark already sent", 300, now.Add(-time.Second), now.Add(time.Second), acked, false},
		{"events not acked", 100, now.Add(-time.Second), now.Add(time.Second), unacked, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := ack.New(100, 1<<20)
			tc.setup(tr)
			s := &stream{tr: tr, sent: tc.sent, lastStatus: tc.lastStatus, nextStatus: tc.nextStatus}
			if got := s.statusDue(now); got != tc.want {
				t.Errorf("statusDue = %v, want %v", got, tc.want)
			}
		})
	}
}

package cdc

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/cdc/ack"
)

// TestPosition checks what a status update confirms (docs/design.md#flush-confirms, #confirm-by-end-lsn, #ordered-acks, #status-cadence): the
// acked watermark, the server's WAL end only when nothing is open or in
// flight, never below the start or below what was already sent.
func TestPosition(t *testing.T) {
	tests := []struct {
		name      string
		start     pglogrepl.LSN
		sent      pglogrepl.LSN
		serverEnd pglogrepl.LSN
		setup     func(*ack.Tracker)
		want      pglogrepl.LSN
	}{
		{"fresh session confirms the start", 100, 100, 0, func(*ack.Tracker) {}, 100},
		{"idle follows the keepalive", 100, 100, 500, func(*ack.Tracker) {}, 500},
		{"acked transaction", 100, 100, 0, func(tr *ack.Tracker) {
			tr.Begin()
			tr.Ack(tr.Add(10))
			tr.Commit(300)
		}, 300},
		{"unacked event holds the watermark", 100, 100, 900, func(tr *ack.Tracker) {
			tr.Begin()
			tr.Ack(tr.Add(10))
			tr.Commit(300)
			tr.Begin()
			tr.Add(10)
			tr.Commit(400)
		}, 300},
		{"open transaction ignores the keepalive", 100, 100, 900, func(tr *ack.Tracker) {
			tr.Begin()
		}, 100},
		{"open transaction with acked events", 100, 100, 900, func(tr *ack.Tracker) {
			tr.Begin()
			tr.Ack(tr.Add(10))
		}, 100},
		{"empty transaction (heartbeat) completes", 100, 100, 0, func(tr *ack.Tracker) {
			tr.Begin()
			tr.Commit(250)
		}, 250},
		{"never backwards", 100, 700, 0, func(tr *ack.Tracker) {
			tr.Begin()
			tr.Ack(tr.Add(10))
			tr.Commit(300)
		}, 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := ack.New(100, 1<<20)
			tt.setup(tr)
			s := &stream{tr: tr, start: tt.start, sent: tt.sent, serverEnd: tt.serverEnd}
			if got := s.position(); got != tt.want {
				t.Fatalf("position() = %s, want %s", got, tt.want)
			}
		})
	}
}

package bench

import (
	"context"
	"sync"
	"time"
)

// walSenderCPU is the CPU (user + system) seconds so far of the WAL sender
// serving slot, read from /proc: only when PostgreSQL runs on this machine
// and the slot is active; false otherwise. A WAL sender is started for each
// replication connection, so its CPU is what it spent serving that reader.
func (db *database) walSenderCPU(ctx context.Context, slot string) (float64, bool) {
	var pid *int32
	if err := db.pool.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil || pid == nil {
		return 0, false
	}
	u, err := readUsage(int(*pid))
	if err != nil {
		return 0, false
	}
	return u.CPUSeconds, true
}

// watchWalSender samples the CPU of slot's WAL sender every interval until
// ctx ends, and returns a function giving the last sample (false when none
// was taken): for a reader whose WAL sender exits with it.
func (db *database) watchWalSender(ctx context.Context, slot string, interval time.Duration) func() (float64, bool) {
	var (
		mu   sync.Mutex
		last float64
		seen bool
	)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if cpu, ok := db.walSenderCPU(ctx, slot); ok {
				mu.Lock()
				last, seen = cpu, true
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() (float64, bool) {
		mu.Lock()
		defer mu.Unlock()
		return last, seen
	}
}

// walSenders is the table cell of the two WAL senders' CPU per million
// events: the relay's / pg_recvlogical's.
func walSenders(row Row) string {
	if row.WalSenderCPUPerM == nil && row.RecvLogicalWalSenderCPUPerM == nil {
		return "-"
	}
	return num(row.WalSenderCPUPerM, "%.1f") + " / " + num(row.RecvLogicalWalSenderCPUPerM, "%.1f")
}

package cdc

import (
	"errors"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestSlotFailoverOnOldServer runs against the shared server when it is
// older than PostgreSQL 17: --slot-failover on stops the relay with a clear
// error before it creates anything, auto creates a plain slot and reports
// eventforge_slot_failover_ready 0 (a promotion would lose it).
func TestSlotFailoverOnOldServer(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	if v, err := serverVersion(t.Context(), db); err != nil || v >= failoverVersion {
		t.Skipf("server_version_num %d (%v): the server has failover slots", v, err)
	}
	cfg := testConfig(t, url, env.Brokers)
	cfg.SlotFailover = SlotFailoverOn
	r := startRelay(t, cfg)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not stop")
	}
	if !errors.Is(r.err, ErrFailoverUnsupported) {
		t.Fatalf("Run = %v, want ErrFailoverUnsupported", r.err)
	}
	if _, err := slots.Status(t.Context(), db, cfg.Slot); !errors.Is(err, slots.ErrSlotNotFound) {
		t.Fatalf("slot created although the relay refused: %v", err)
	}

	cfg.SlotFailover = SlotFailoverAuto
	cfg.FailoverCheckInterval = 200 * time.Millisecond
	r = startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	s, err := slots.Status(t.Context(), db, cfg.Slot)
	if err != nil || s.Failover {
		t.Fatalf("slot %+v, %v: want a plain slot", s, err)
	}
	waitFor(t, 10*time.Second, "eventforge_slot_failover_ready", func() bool {
		mfs, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "eventforge_slot_failover_ready" && len(mf.GetMetric()) == 1 {
				if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 0 {
					t.Fatalf("eventforge_slot_failover_ready = %v on a server without failover slots", v)
				}
				return true
			}
		}
		return false
	})
}

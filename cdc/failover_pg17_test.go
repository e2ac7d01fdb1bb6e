package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// failoverPG is the PostgreSQL version of the failover tests: the one the
// run asks for when it has failover slots, else 17.
func failoverPG() string {
	if v := testenv.Version(); v >= "17" {
		return v
	}
	return "17"
}

// TestFailoverSlotProtected runs a relay on a PostgreSQL 17 primary with a
// streaming standby set up for slot synchronisation: the relay creates a
// failover slot, the standby gets a synced, persistent copy of it once the
// relay confirmed progress, and eventforge_slot_failover_ready turns 1; a
// plain slot made by hand is converted before the relay streams from it.
func TestFailoverSlotProtected(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	primary := testenv.StartPostgresVersion(t, failoverPG())
	standby := primary.StartStandby(t)
	db := connect(t, primary.URL())
	sdb := connect(t, standby.URL())

	cfg := testConfig(t, primary.URL(), env.Brokers)
	cfg.StandbyURL = standby.URL()
	cfg.FailoverCheckInterval = 300 * time.Millisecond
	cfg.HeartbeatInterval = 200 * time.Millisecond // progress on the slot, for the standby's copy
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	if s := slotOn(t, db, cfg.Slot); !s.Failover {
		t.Fatalf("slot %s created without failover: %+v", cfg.Slot, s)
	}
	w := newWriter(t, db, 10)
	w.txn(10, false, true)
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)
	waitFor(t, 60*time.Second, "eventforge_slot_failover_ready 1", func() bool {
		return metricValue(t, r, "eventforge_slot_failover_ready") == 1
	})
	if s := slotOn(t, sdb, cfg.Slot); !s.Synced || s.Temporary || !s.Failover {
		t.Fatalf("standby's copy %+v: want synced, persistent, failover", s)
	}

	// A plain slot, as an older relay made it.
	plain := testenv.UniqueName("slot")
	mustExec(t, db, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", plain)
	cfg2 := testConfig(t, primary.URL(), env.Brokers)
	cfg2.Slot = plain
	r2 := startRelay(t, cfg2)
	waitFor(t, 60*time.Second, "streaming from the plain slot", func() bool { return r2.State() == stateStreaming })
	if s := slotOn(t, db, plain); !s.Failover {
		t.Fatalf("slot %s not converted: %+v", plain, s)
	}
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}
	// The server ends the slot's walsender a moment after the relay left.
	waitFor(t, 10*time.Second, "the plain slot dropped", func() bool {
		_, err := db.Exec(t.Context(), "SELECT pg_drop_replication_slot($1)", plain)
		return err == nil
	})
}

func slotOn(t testing.TB, db *pgx.Conn, slot string) slots.Slot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := slots.Status(ctx, db, slot)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package slots_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestStatusMatchesDirectQuery(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	slot := testenv.UniqueName("slot")
	createSlot(t, conn, slot)
	insertEvents(t, conn, 500) // WAL the slot has not confirmed: a lag above zero

	var confirmed, restart string
	var lagBefore, retainedBefore int64
	err := conn.QueryRow(t.Context(), `SELECT confirmed_flush_lsn::text, restart_lsn::text,
		(pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, (pg_current_wal_lsn() - restart_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed, &restart, &lagBefore, &retainedBefore)
	if err != nil {
		t.Fatal(err)
	}
	s, err := slots.Status(t.Context(), conn, slot)
	if err != nil {
		t.Fatal(err)
	}
	var lagAfter, lagFromCurrent, retainedFromCurrent int64
	err = conn.QueryRow(t.Context(), `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint,
		($2::pg_lsn - confirmed_flush_lsn)::bigint, ($2::pg_lsn - restart_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot, s.CurrentLSN).Scan(&lagAfter, &lagFromCurrent, &retainedFromCurrent)
	if err != nil {
		t.Fatal(err)
	}

	if s.Name != slot || s.Plugin != "pgoutput" || s.Type != "logical" || s.Database != currentDB(t, conn) {
		t.Errorf("identity = %s/%s/%s/%s", s.Name, s.Plugin, s.Type, s.Database)
	}
	if s.Active || s.ActivePID != 0 || s.Temporary {
		t.Errorf("active=%v pid=%d temporary=%v, want an idle permanent slot", s.Active, s.ActivePID, s.Temporary)
	}
	if s.WALStatus != "reserved" {
		t.Errorf("wal_status = %q, want reserved", s.WALStatus)
	}
	if s.ConfirmedFlushLSN != confirmed || s.RestartLSN != restart {
		t.Errorf("LSNs = %s/%s, want %s/%s", s.ConfirmedFlushLSN, s.RestartLSN, confirmed, restart)
	}
	if s.LagBytes == nil || s.RetainedBytes == nil {
		t.Fatalf("lag %v, retained %v: want numbers", s.LagBytes, s.RetainedBytes)
	}
	// The shared cluster's WAL moves with other tests: the reading must lie
	// between the two direct readings around it, and equal the direct
	// difference from the WAL position it reports.
	if *s.LagBytes < lagBefore || *s.LagBytes > lagAfter || *s.LagBytes <= 0 {
		t.Errorf("lag = %d, want in [%d, %d] and > 0", *s.LagBytes, lagBefore, lagAfter)
	}
	if *s.LagBytes != lagFromCurrent || *s.RetainedBytes != retainedFromCurrent {
		t.Errorf("lag/retained = %d/%d, direct from %s = %d/%d", *s.LagBytes, *s.RetainedBytes, s.CurrentLSN, lagFromCurrent, retainedFromCurrent)
	}
	if *s.RetainedBytes < retainedBefore {
		t.Errorf("retained = %d, below the earlier direct reading %d", *s.RetainedBytes, retainedBefore)
	}
	if s.SafeWALSize != nil {
		t.Errorf("safe_wal_size = %d, want NULL with max_slot_wal_keep_size = -1", *s.SafeWALSize)
	}
}

func TestStatusUnknownSlot(t *testing.T) {
	t.Parallel()
	conn := connect(t, testenv.Shared(t).NewDatabase(t))
	_, err := slots.Status(t.Context(), conn, "no_such_slot_here")
	if !errors.Is(err, slots.ErrSlotNotFound) || !strings.Contains(err.Error(), "no_such_slot_here") {
		t.Fatalf("err = %v, want ErrSlotNotFound naming the slot", err)
	}
}

func TestListShowsOnlyThisDatabaseInOrder(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	mine, other := connect(t, env.NewDatabase(t)), connect(t, env.NewDatabase(t))
	a, b := testenv.UniqueName("b"), testenv.UniqueName("a")
	createSlot(t, mine, a)
	createSlot(t, mine, b)
	createSlot(t, other, testenv.UniqueName("other"))

	got, err := slots.List(t.Context(), mine)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != b || got[1].Name != a {
		t.Fatalf("List = %v, want [%s %s]", names(got), b, a)
	}
	empty := connect(t, env.NewDatabase(t))
	if got, err := slots.List(t.Context(), empty); err != nil || len(got) != 0 {
		t.Fatalf("List of a database without slots = %v, %v", names(got), err)
	}
}

func TestStatusOfActiveSlotNamesPID(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	slot := testenv.UniqueName("slot")
	createSlot(t, conn, slot)
	pid, _ := slotstest.Hold(t, url, slot)
	s, err := slots.Status(t.Context(), conn, slot)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Active || s.ActivePID != pid {
		t.Fatalf("active=%v pid=%d, want active for %d", s.Active, s.ActivePID, pid)
	}
}

func names(ss []slots.Slot) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

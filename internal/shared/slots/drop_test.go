package slots_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func writeRecord(t testing.TB, conn *pgx.Conn, slot string) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), "INSERT INTO relay_state (slot_name, confirmed_lsn) VALUES ($1, '0/1234')", slot); err != nil {
		t.Fatal(err)
	}
}

func slotExists(t testing.TB, conn *pgx.Conn, slot string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func recordExists(t testing.TB, conn *pgx.Conn, slot string) bool {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM relay_state WHERE slot_name = $1", slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestDropRefusesActiveSlotThenDropsIt(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	slot := testenv.UniqueName("slot")
	createSlot(t, conn, slot)
	writeRecord(t, conn, slot)
	pid, release := slotstest.Hold(t, url, slot)

	_, err := slots.Drop(t.Context(), conn, slot)
	if !errors.Is(err, slots.ErrSlotActive) || !strings.Contains(err.Error(), fmt.Sprint(pid)) {
		t.Fatalf("drop of an active slot: %v, want ErrSlotActive naming PID %d", err, pid)
	}
	if !slotExists(t, conn, slot) || !recordExists(t, conn, slot) {
		t.Fatal("a refused drop removed the slot or its relay_state row")
	}

	release()
	d, err := slots.Drop(t.Context(), conn, slot)
	if err != nil {
		t.Fatal(err)
	}
	if d.Slot == nil || d.Slot.Name != slot || d.Record == nil || d.Record.ConfirmedLSN != "0/1234" {
		t.Fatalf("Dropped = %+v, want the slot and its relay_state row", d)
	}
	if slotExists(t, conn, slot) || recordExists(t, conn, slot) {
		t.Fatal("slot or relay_state row still there after the drop")
	}
	if _, err := slots.Drop(t.Context(), conn, slot); !errors.Is(err, slots.ErrSlotNotFound) {
		t.Fatalf("second drop: %v, want ErrSlotNotFound", err)
	}
}

func TestDropCases(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	for _, tc := range []struct {
		name              string
		slot, record      bool
		otherDB           bool
		wantErr           error
		wantSlot, wantRec bool // what Drop reports removed
		slotLeft, recLeft bool
	}{
		{name: "slot without record", slot: true, wantSlot: true},
		{name: "record without slot", record: true, wantRec: true},
		{name: "neither", wantErr: slots.ErrSlotNotFound},
		{name: "slot of another database", slot: true, record: true, otherDB: true, wantErr: slots.ErrWrongDB, slotLeft: true, recLeft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := connect(t, env.NewDatabase(t))
			owner := conn
			if tc.otherDB {
				owner = connect(t, env.NewDatabase(t))
			}
			slot := testenv.UniqueName("slot")
			if tc.slot {
				createSlot(t, owner, slot)
			}
			if tc.record {
				writeRecord(t, conn, slot)
			}
			d, err := slots.Drop(t.Context(), conn, slot)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if (d.Slot != nil) != tc.wantSlot || (d.Record != nil) != tc.wantRec {
				t.Errorf("Dropped = %+v, want slot %v record %v", d, tc.wantSlot, tc.wantRec)
			}
			if slotExists(t, owner, slot) != tc.slotLeft || recordExists(t, conn, slot) != tc.recLeft {
				t.Errorf("after drop: slot %v record %v, want %v %v",
					slotExists(t, owner, slot), recordExists(t, conn, slot), tc.slotLeft, tc.recLeft)
			}
		})
	}
}

func TestRelayRecords(t *testing.T) {
	t.Parallel()
	conn := connect(t, testenv.Shared(t).NewDatabase(t))
	if recs, err := slots.RelayRecords(t.Context(), conn); err != nil || len(recs) != 0 {
		t.Fatalf("empty relay_state: %v, %v", recs, err)
	}
	writeRecord(t, conn, "b_slot")
	writeRecord(t, conn, "a_slot")
	recs, err := slots.RelayRecords(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Slot != "a_slot" || recs[1].Slot != "b_slot" || recs[0].ConfirmedLSN != "0/1234" || recs[0].UpdatedAt.IsZero() {
		t.Fatalf("RelayRecords = %+v", recs)
	}
	if _, err := conn.Exec(t.Context(), "DROP TABLE relay_state"); err != nil {
		t.Fatal(err)
	}
	if recs, err := slots.RelayRecords(t.Context(), conn); err != nil || len(recs) != 0 {
		t.Fatalf("without relay_state: %v, %v; want none and no error", recs, err)
	}
}

// TestRelayStateWriteNeverMovesBack writes a position, a lower one, then a
// higher one through WriteRelayState and reads the row back with
// ReadRelayRecord: the lower write must not move it back, nor make it look
// confirmed later than it was (as a relay resuming on a promoted standby
// behind the row would).
func TestRelayStateWriteNeverMovesBack(t *testing.T) {
	t.Parallel()
	conn := connect(t, testenv.Shared(t).NewDatabase(t))
	if _, ok, err := slots.ReadRelayRecord(t.Context(), conn, "s"); err != nil || ok {
		t.Fatalf("no row yet: ok %v, %v", ok, err)
	}
	var last time.Time
	for _, step := range []struct {
		write, want string
		moves       bool
	}{{"0/2000", "0/2000", true}, {"0/1000", "0/2000", false}, {"0/2000", "0/2000", false}, {"0/3000", "0/3000", true}} {
		time.Sleep(10 * time.Millisecond) // now() differs from the last write's
		if err := slots.WriteRelayState(t.Context(), conn, "s", step.write); err != nil {
			t.Fatal(err)
		}
		rec, ok, err := slots.ReadRelayRecord(t.Context(), conn, "s")
		if err != nil || !ok || rec.Slot != "s" || rec.ConfirmedLSN != step.want || rec.UpdatedAt.IsZero() {
			t.Fatalf("after writing %s: %+v, ok %v, %v; want %s", step.write, rec, ok, err, step.want)
		}
		if moved := !rec.UpdatedAt.Equal(last); moved != step.moves {
			t.Fatalf("after writing %s: updated_at %s (was %s), want it moved: %v", step.write, rec.UpdatedAt, last, step.moves)
		}
		last = rec.UpdatedAt
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/slots"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// runOpsCmd runs the CLI in process and returns its standard output.
func runOpsCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	withPrune(root)
	var out bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// withPrune adds `outbox prune` under `outbox` until root.go does.
func withPrune(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "outbox" {
			continue
		}
		for _, sub := range c.Commands() {
			if sub.Name() == "prune" {
				return
			}
		}
		c.AddCommand(newOutboxPruneCmd())
	}
}

func opsConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestSlotStatusJSONAndTable(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := opsConn(t, url)
	slot, plain := testenv.UniqueName("relay"), testenv.UniqueName("plain")
	slotstest.Create(t, url, slot, true)
	slotstest.Create(t, url, plain, false)
	if _, err := conn.Exec(t.Context(), "INSERT INTO relay_state (slot_name, confirmed_lsn) VALUES ('vanished', '0/42')"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'orders', 'o', 'order.created', '{}' FROM generate_series(1, 200)`); err != nil {
		t.Fatal(err)
	}
	var confirmed string
	var lagBefore int64
	if err := conn.QueryRow(t.Context(), `SELECT confirmed_flush_lsn::text, (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed, &lagBefore); err != nil {
		t.Fatal(err)
	}

	out, err := runOpsCmd(t, "slot", "status", "--pg-url", url, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep slotReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON output does not parse: %v\n%s", err, out)
	}
	if len(rep.Slots) != 2 || len(rep.Missing) != 1 || rep.Missing[0].Slot != "vanished" {
		t.Fatalf("report = %+v, want 2 slots and 1 missing", rep)
	}
	var got *slotEntry
	for i := range rep.Slots {
		if rep.Slots[i].Name == slot {
			got = &rep.Slots[i]
		}
	}
	if got == nil || got.RelayState == nil || got.ConfirmedFlushLSN != confirmed || got.LagBytes == nil || *got.LagBytes < lagBefore {
		t.Fatalf("slot %s = %+v, want confirmed %s, lag >= %d and its relay_state", slot, got, confirmed, lagBefore)
	}
	// The raw JSON carries byte counts as numbers under their documented names.
	var raw map[string][]map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	if _, ok := raw["slots"][0]["lag_bytes"].(float64); !ok {
		t.Errorf("lag_bytes is not a JSON number: %v", raw["slots"][0])
	}

	out, err = runOpsCmd(t, "slot", "status", "--pg-url", url)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SLOT", slot, plain, "pgoutput", "reserved", "unlimited", "vanished", "MISSING", "slot vanished is missing"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	out, err = runOpsCmd(t, "slot", "status", "--pg-url", url, "--slot", plain, "--json")
	if err != nil {
		t.Fatal(err)
	}
	rep = slotReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Slots) != 1 || rep.Slots[0].Name != plain || len(rep.Missing) != 0 {
		t.Fatalf("--slot %s: %v %+v", plain, err, rep)
	}
}

func TestSlotStatusOfMissingSlots(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	out, err := runOpsCmd(t, "slot", "status", "--pg-url", url)
	if err != nil || !strings.Contains(out, "no logical replication slots") {
		t.Fatalf("empty database: %q, %v", out, err)
	}
	if _, err := opsConn(t, url).Exec(t.Context(), "INSERT INTO relay_state (slot_name, confirmed_lsn) VALUES ('gone', '0/42')"); err != nil {
		t.Fatal(err)
	}
	_, err = runOpsCmd(t, "slot", "status", "--pg-url", url, "--slot", "gone")
	if !errors.Is(err, slots.ErrSlotNotFound) || !strings.Contains(err.Error(), "relay confirmed 0/42") {
		t.Fatalf("missing slot with relay_state: %v", err)
	}
}

// The real binary: a clear one-line reason and a non-zero exit status.
func TestSlotStatusUnknownSlotExitsNonZero(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	cmd := exec.Command(testenv.Binary(t), "slot", "status", "--slot", "nope_slot")
	cmd.Env = append(cmd.Environ(), "EVENTFORGE_PG_URL="+url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	if got := stderr.String(); got != "eventforge: replication slot not found: nope_slot\n" {
		t.Fatalf("stderr = %q", got)
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout = %q, want nothing", stdout.String())
	}
}

func TestSlotDrop(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := opsConn(t, url)
	slot := testenv.UniqueName("relay")
	slotstest.Create(t, url, slot, true)
	exists := func() (hasSlot, hasRecord bool) {
		t.Helper()
		if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1),
			EXISTS (SELECT 1 FROM relay_state WHERE slot_name = $1)`, slot).Scan(&hasSlot, &hasRecord); err != nil {
			t.Fatal(err)
		}
		return hasSlot, hasRecord
	}

	_, err := runOpsCmd(t, "slot", "drop", "--pg-url", url, "--slot", slot)
	if err == nil || !strings.Contains(err.Error(), "without --yes") {
		t.Fatalf("drop without --yes: %v", err)
	}
	if s, r := exists(); !s || !r {
		t.Fatal("drop without --yes removed something")
	}

	pid, release := slotstest.Hold(t, url, slot)
	_, err = runOpsCmd(t, "slot", "drop", "--pg-url", url, "--slot", slot, "--yes")
	if !errors.Is(err, slots.ErrSlotActive) || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", pid)) {
		t.Fatalf("drop of an active slot: %v, want the PID %d", err, pid)
	}
	if s, r := exists(); !s || !r {
		t.Fatal("refused drop removed something")
	}

	release()
	out, err := runOpsCmd(t, "slot", "drop", "--pg-url", url, "--slot", slot, "--yes")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dropped replication slot " + slot, "deleted its relay_state row", "next: eventforge cdc run --backfill-since "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if s, r := exists(); s || r {
		t.Fatalf("after drop: slot %v, relay_state row %v", s, r)
	}
}

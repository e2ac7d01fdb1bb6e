package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/eventforge/eventforge/internal/shared/slots"
)

func newSlotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slot",
		Short: "Inspect and drop the logical replication slots the relay reads",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSlotStatusCmd(), newSlotDropCmd())
	return cmd
}

// connectPG opens a plain connection; the error never repeats the password.
func connectPG(ctx context.Context, p *pgFlags) (*pgx.Conn, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s: %w", p.redacted(), err)
	}
	return conn, nil
}

func newSlotStatusCmd() *cobra.Command {
	var (
		pg     pgFlags
		name   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status [--slot NAME] [--json]",
		Short: "Show replication slots: activity, wal_status, failover, lag and retained WAL",
		Long: `Show the logical replication slots of the database (or the one named by --slot): the PID of the
walsender that holds it, wal_status (reserved, extended, unreserved, lost), failover (a PostgreSQL 17
failover slot, synchronised to standbys) and synced (on a standby: a copy synchronised from the
primary, which a promotion keeps), confirmed and restart
LSN, lag (current WAL - confirmed_flush_lsn: not yet confirmed by the relay), retained WAL (current
WAL - restart_lsn: what the server keeps on disk for the slot) and safe_wal_size (WAL that may still
be written before the slot is lost; unlimited when max_slot_wal_keep_size is -1).
A slot that relay_state says the relay streamed from but that no longer exists is shown as MISSING:
see docs/runbook.md. --json prints {"database", "slots": [...], "missing": [...]} with byte counts
as numbers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := connectPG(cmd.Context(), &pg)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(cmd.Context()))
			rep, err := readSlotReport(cmd.Context(), conn, name)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return writeSlotTable(cmd.OutOrStdout(), rep)
		},
	}
	pg.register(cmd)
	cmd.Flags().StringVar(&name, "slot", "", "show only this slot (default: every logical slot of the database)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	annotateEnv(cmd)
	return cmd
}

// slotReport is what `slot status` shows.
type slotReport struct {
	Database string              `json:"database"`
	Slots    []slotEntry         `json:"slots"`
	Missing  []slots.RelayRecord `json:"missing"` // relay_state rows without their slot
}

type slotEntry struct {
	slots.Slot
	RelayState *slots.RelayRecord `json:"relay_state,omitempty"`
}

// readSlotReport reads the database's logical slots (or the one named),
// each beside its relay_state row, and the relay_state rows whose slot is
// gone.
func readSlotReport(ctx context.Context, conn *pgx.Conn, name string) (slotReport, error) {
	rep := slotReport{Slots: []slotEntry{}, Missing: []slots.RelayRecord{}}
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&rep.Database); err != nil {
		return rep, fmt.Errorf("read current database: %w", err)
	}
	recs, err := slots.RelayRecords(ctx, conn)
	if err != nil {
		return rep, err
	}
	list, err := readSlots(ctx, conn, name, recs)
	if err != nil {
		return rep, err
	}
	seen := map[string]bool{}
	for _, s := range list {
		e := slotEntry{Slot: s}
		for i := range recs {
			if recs[i].Slot == s.Name {
				e.RelayState = &recs[i]
			}
		}
		seen[s.Name] = true
		rep.Slots = append(rep.Slots, e)
	}
	rep.Missing = append(rep.Missing, missingSlots(ctx, conn, name, recs, seen)...)
	return rep, nil
}

// readSlots lists the database's logical slots, or reads the one named; a
// named slot that is gone while relay_state has a row for it is explained
// with what the relay last confirmed on it.
func readSlots(ctx context.Context, conn *pgx.Conn, name string, recs []slots.RelayRecord) ([]slots.Slot, error) {
	if name == "" {
		return slots.List(ctx, conn)
	}
	s, err := slots.Status(ctx, conn, name)
	if errors.Is(err, slots.ErrSlotNotFound) {
		for _, r := range recs {
			if r.Slot == name {
				return nil, fmt.Errorf("%w; relay_state says the relay confirmed %s on it at %s: events after that were never published; see docs/runbook.md (lost or missing slot)",
					err, r.ConfirmedLSN, r.UpdatedAt.UTC().Format(time.RFC3339))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return []slots.Slot{s}, nil
}

// missingSlots are the relay_state rows (of the slot named, or all) whose
// slot was not listed and does not exist.
func missingSlots(ctx context.Context, conn *pgx.Conn, name string, recs []slots.RelayRecord, seen map[string]bool) []slots.RelayRecord {
	var missing []slots.RelayRecord
	for _, r := range recs {
		if !seen[r.Slot] && (name == "" || name == r.Slot) {
			// A relay_state row may name a slot of another database only
			// if someone moved it; List shows this database's slots.
			if _, err := slots.Status(ctx, conn, r.Slot); errors.Is(err, slots.ErrSlotNotFound) {
				missing = append(missing, r)
			}
		}
	}
	return missing
}

func writeSlotTable(w io.Writer, rep slotReport) error {
	if len(rep.Slots) == 0 && len(rep.Missing) == 0 {
		_, err := fmt.Fprintf(w, "no logical replication slots in database %s\n", rep.Database)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tPLUGIN\tACTIVE PID\tWAL STATUS\tFAILOVER\tSYNCED\tCONFIRMED LSN\tRESTART LSN\tLAG\tRETAINED WAL\tSAFE WAL\tRELAY CONFIRMED AT")
	for _, e := range rep.Slots {
		pid := "-"
		if e.Active {
			pid = fmt.Sprint(e.ActivePID)
		}
		safe := humanBytes(e.SafeWALSize)
		if e.SafeWALSize == nil && e.WALStatus != "lost" {
			safe = "unlimited"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Plugin, pid, e.WALStatus,
			yesNo(e.Failover), yesNo(e.Synced), orDash(e.ConfirmedFlushLSN), orDash(e.RestartLSN), humanBytes(e.LagBytes), humanBytes(e.RetainedBytes), safe, relayAt(e.RelayState))
	}
	for _, r := range rep.Missing {
		fmt.Fprintf(tw, "%s\t-\t-\tMISSING\t-\t-\t-\t-\t-\t-\t-\t%s\n", r.Slot, relayAt(&r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Missing {
		fmt.Fprintf(w, "slot %s is missing although the relay confirmed %s on it at %s: events after that were never published; see docs/runbook.md (lost or missing slot)\n",
			r.Slot, r.ConfirmedLSN, r.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func relayAt(r *slots.RelayRecord) string {
	if r == nil {
		return "-"
	}
	return r.UpdatedAt.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// humanBytes prints a byte count in binary units, "-" for unknown.
func humanBytes(n *int64) string {
	if n == nil {
		return "-"
	}
	v := *n
	if v < 1024 && v > -1024 {
		return fmt.Sprintf("%d B", v)
	}
	f := float64(v)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= 1024
		if f < 1024 && f > -1024 || unit == "TiB" {
			return fmt.Sprintf("%.1f %s", f, unit)
		}
	}
	return fmt.Sprintf("%d B", v) // not reached
}

func newSlotDropCmd() *cobra.Command {
	var (
		pg   pgFlags
		name string
		yes  bool
	)
	cmd := &cobra.Command{
		Use:   "drop --slot NAME --yes",
		Short: "Drop a replication slot the relay no longer reads, and forget it in relay_state",
		Long: `Drop the logical replication slot --slot and delete its relay_state row, so that the next
eventforge cdc run creates a fresh slot instead of refusing to start.

Dropping a slot SKIPS EVERY EVENT it has not delivered yet: the new slot starts at the WAL position
of its creation. The recovery is one command: eventforge cdc run --backfill-since TIME, with a TIME
safely before the last confirmation of the old slot (shown by eventforge slot status and printed
here). It creates the new slot with a snapshot, publishes the rows since TIME that the snapshot sees,
and only then streams, so each key keeps its order; republished events keep their event IDs, so
consumers drop the duplicates. See docs/runbook.md.

Refuses without --yes, refuses while the slot is active (a relay streams from it: stop that relay
first), and refuses a slot of another database. When only the relay_state row is left (the slot is
already gone), it deletes the row.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("no slot: set --slot NAME")
			}
			if !yes {
				return fmt.Errorf("refusing to drop replication slot %s without --yes: dropping it skips every event it has not delivered (recovery: eventforge cdc run --backfill-since, see --help)", name)
			}
			conn, err := connectPG(cmd.Context(), &pg)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(cmd.Context()))
			d, err := slots.Drop(cmd.Context(), conn, name)
			if err != nil {
				return err
			}
			return writeDropped(cmd.OutOrStdout(), name, d)
		},
	}
	pg.register(cmd)
	cmd.Flags().StringVar(&name, "slot", "", "replication slot to drop (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm: undelivered events of the slot are skipped")
	annotateEnv(cmd)
	return cmd
}

func writeDropped(w io.Writer, name string, d slots.Dropped) error {
	if s := d.Slot; s != nil {
		fmt.Fprintf(w, "dropped replication slot %s (database %s, confirmed_flush_lsn %s, %s not confirmed)\n",
			name, s.Database, orDash(s.ConfirmedFlushLSN), humanBytes(s.LagBytes))
	} else {
		fmt.Fprintf(w, "replication slot %s did not exist\n", name)
	}
	since := "TIME (safely before the old slot's last confirmation)"
	if r := d.Record; r != nil {
		fmt.Fprintf(w, "deleted its relay_state row (the relay confirmed %s at %s)\n", r.ConfirmedLSN, r.UpdatedAt.UTC().Format(time.RFC3339))
		// The relay's recover_since (the oldest transaction open before the
		// last confirmed commit), else an hour before the confirmation: a
		// transaction's rows carry its start time; duplicates are harmless,
		// gaps are not.
		since = r.RecoverFrom().UTC().Format(time.RFC3339)
	}
	_, err := fmt.Fprintf(w, "next: eventforge cdc run --backfill-since %s (it creates a new slot and publishes the rows since then from its snapshot before streaming)\n", since)
	return err
}

package slots

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// failoverVersion is the first server version (server_version_num) with
// failover slots.
const failoverVersion = 170000

// Protection tells whether a logical slot survives the promotion of a
// standby (PostgreSQL 17 failover slots): the slot is a failover slot, the
// primary holds decoded changes back until the standbys named in
// synchronized_standby_slots have their WAL, and the standby (when one was
// asked) has a synchronised, persistent copy of the slot.
type Protection struct {
	Slot          string
	ServerVersion int  // server_version_num of the primary
	Failover      bool // the slot's failover flag on the primary
	// StandbySlots are the physical slots named in the primary's
	// synchronized_standby_slots; InactiveStandbySlots those of them that
	// do not exist as physical slots or that no standby streams from.
	StandbySlots         []string
	InactiveStandbySlots []string
	// Standbys is how many physical standbys stream from the primary.
	Standbys int
	// StandbyChecked is true when a standby was asked; then StandbyHasSlot,
	// Synced and Temporary describe its copy of the slot.
	StandbyChecked bool
	StandbyHasSlot bool
	Synced         bool
	Temporary      bool
}

// Supported reports whether the primary has failover slots at all.
func (p Protection) Supported() bool { return p.ServerVersion >= failoverVersion }

// Ready reports whether a promotion would keep the slot and everything it
// delivered.
func (p Protection) Ready() bool { return len(p.Problems()) == 0 }

// Problems says, one phrase each, what keeps the slot from surviving a
// promotion; none when it is protected.
func (p Protection) Problems() []string {
	if !p.Supported() {
		return []string{fmt.Sprintf("PostgreSQL %d has no failover slots (17 or later): a promoted standby has no slot %s", p.ServerVersion/10000, p.Slot)}
	}
	var out []string
	if !p.Failover {
		out = append(out, fmt.Sprintf("slot %s is not a failover slot (cdc run --slot-failover on converts it)", p.Slot))
	}
	if len(p.StandbySlots) == 0 {
		out = append(out, "synchronized_standby_slots is empty: the relay may receive changes the standby does not have yet")
	}
	if len(p.InactiveStandbySlots) > 0 {
		out = append(out, fmt.Sprintf("synchronized_standby_slots names %s, which no standby streams from (the relay waits for them)", strings.Join(p.InactiveStandbySlots, ", ")))
	}
	if p.StandbyChecked {
		switch {
		case !p.StandbyHasSlot:
			out = append(out, fmt.Sprintf("the standby has no copy of slot %s (sync_replication_slots, hot_standby_feedback and dbname in primary_conninfo)", p.Slot))
		case !p.Synced || p.Temporary:
			out = append(out, fmt.Sprintf("the standby's copy of slot %s is not synced yet (synced %v, temporary %v): it becomes usable once the relay confirmed progress past the copy's position", p.Slot, p.Synced, p.Temporary))
		}
	}
	return out
}

// CheckProtection reads the protection of slot on primary and, when standby
// is not nil, on a standby of it.
func CheckProtection(ctx context.Context, primary, standby Querier, slot string) (Protection, error) {
	p := Protection{Slot: slot}
	if err := queryRow(ctx, primary, "SELECT current_setting('server_version_num')::int", nil, &p.ServerVersion); err != nil {
		return p, fmt.Errorf("read server version: %w", err)
	}
	if !p.Supported() {
		return p, nil
	}
	s, err := Status(ctx, primary, slot)
	if err != nil && !errors.Is(err, ErrSlotNotFound) {
		return p, err
	}
	p.Failover = s.Failover
	var list string
	if err := queryRow(ctx, primary, "SELECT current_setting('synchronized_standby_slots')", nil, &list); err != nil {
		return p, fmt.Errorf("read synchronized_standby_slots: %w", err)
	}
	p.StandbySlots = ParseSlotList(list)
	if err := queryRow(ctx, primary, `SELECT coalesce(array_agg(n ORDER BY n), '{}') FROM unnest($1::text[]) AS n
		WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.slot_name = n AND s.slot_type = 'physical' AND s.active)`,
		[]any{p.StandbySlots}, &p.InactiveStandbySlots); err != nil {
		return p, fmt.Errorf("read the standby slots: %w", err)
	}
	if err := queryRow(ctx, primary, `SELECT count(*) FROM pg_stat_replication r
		WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')`,
		nil, &p.Standbys); err != nil {
		return p, fmt.Errorf("count the standbys: %w", err)
	}
	if standby == nil {
		return p, nil
	}
	p.StandbyChecked = true
	got, err := Status(ctx, standby, slot)
	switch {
	case errors.Is(err, ErrSlotNotFound):
	case err != nil:
		return p, fmt.Errorf("standby: %w", err)
	default:
		p.StandbyHasSlot, p.Synced, p.Temporary = true, got.Synced, got.Temporary
	}
	return p, nil
}

// ParseSlotList splits a slot list setting (synchronized_standby_slots) into
// its names, without blanks and quotes.
func ParseSlotList(v string) []string {
	out := []string{}
	for _, n := range strings.Split(v, ",") {
		if n = strings.Trim(strings.TrimSpace(n), `"`); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// queryRow scans the one row of a query into dst.
func queryRow(ctx context.Context, q Querier, sql string, args []any, dst any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

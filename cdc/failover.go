package cdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/shared/fielderr"
	ipg "github.com/eventforge/eventforge/internal/shared/pgconn"
	"github.com/eventforge/eventforge/internal/shared/slots"
)

// Values of Config.SlotFailover.
const (
	SlotFailoverAuto = "auto" // a failover slot on PostgreSQL 17 and later
	SlotFailoverOn   = "on"   // a failover slot; older servers stop the relay
	SlotFailoverOff  = "off"  // a slot that stays on its server
)

// DefaultFailoverCheckInterval is how often the relay checks that its slot
// would survive a promotion.
const DefaultFailoverCheckInterval = time.Minute

// failoverVersion is the first server_version_num with failover slots.
const failoverVersion = 170000

// ErrFailoverUnsupported stops a relay told to make a failover slot on a
// server that has none.
var ErrFailoverUnsupported = errors.New("failover slots need PostgreSQL 17")

// validateFailover checks the failover settings (after defaults).
func (c Config) validateFailover() []error {
	var errs []error
	if !slices.Contains([]string{SlotFailoverAuto, SlotFailoverOn, SlotFailoverOff}, c.SlotFailover) {
		errs = append(errs, fielderr.New("Config.SlotFailover", "%q: want auto, on or off", c.SlotFailover))
	}
	if c.StandbyURL != "" {
		if _, err := ipg.ParseConfig(c.StandbyURL); err != nil {
			errs = append(errs, fielderr.Wrap("Config.StandbyURL", err))
		}
	}
	if c.FailoverCheckInterval < 0 {
		errs = append(errs, fielderr.New("Config.FailoverCheckInterval", "%s: must be positive", c.FailoverCheckInterval))
	}
	return errs
}

// wantFailover decides whether the slot must be a failover slot on a server
// of version (server_version_num).
func wantFailover(mode string, version int) (bool, error) {
	switch {
	case mode == SlotFailoverOff:
		return false, nil
	case version >= failoverVersion:
		return true, nil
	case mode == SlotFailoverOn:
		return false, fatalf(ErrFailoverUnsupported, "--slot-failover on: PostgreSQL %d has no failover slots (17 or later); use --slot-failover auto or off", version/10000)
	}
	return false, nil
}

// failoverFor decides whether the slot must be a failover slot on the
// server conn reached.
func (r *Relay) failoverFor(ctx context.Context, conn *pgx.Conn) (bool, error) {
	version, err := serverVersion(ctx, conn)
	if err != nil {
		return false, err
	}
	return wantFailover(r.cfg.SlotFailover, version)
}

// serverVersion is the server's server_version_num.
func serverVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0, fmt.Errorf("read server_version_num: %w", err)
	}
	return v, nil
}

// createSlotCommand is the replication command that creates the slot with
// an exported snapshot, a failover slot when failover is set (PostgreSQL 17
// syntax; pglogrepl has no option for it). The name was checked against
// slotName, so it needs no quoting.
func createSlotCommand(slot string, failover bool) string {
	if failover {
		return fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)", slot)
	}
	return fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput EXPORT_SNAPSHOT", slot)
}

// alterSlotCommand makes an existing slot a failover slot.
func alterSlotCommand(slot string) string {
	return fmt.Sprintf("ALTER_REPLICATION_SLOT %s (FAILOVER true)", slot)
}

// convertSlot makes the slot a failover slot before the relay streams from
// it: no walsender holds it now, so the command does not wait.
func (r *Relay) convertSlot(ctx context.Context, repl *pgconn.PgConn) error {
	if _, err := repl.Exec(ctx, alterSlotCommand(r.cfg.Slot)).ReadAll(); err != nil {
		return fmt.Errorf("make replication slot %s a failover slot: %w", r.cfg.Slot, err)
	}
	r.log.Info("replication slot converted to a failover slot: standbys with sync_replication_slots keep a copy of it")
	return nil
}

// protectionWatch remembers the last protection reading, so that the log
// says each change once.
type protectionWatch struct {
	said string
}

// protectionGuard schedules the failover check: when a session starts
// streaming (the slot exists then, on the server the relay reached) and
// every FailoverCheckInterval while streaming, at the pace of the slot
// sampling.
type protectionGuard struct {
	watch protectionWatch
	last  time.Time
}

// sampleAndGuard samples the slot, then runs the failover check when it is
// due.
func (r *Relay) sampleAndGuard(ctx context.Context, conn *pgx.Conn, g *protectionGuard) error {
	if err := r.sampleSlot(ctx, conn); err != nil {
		return err
	}
	if r.State() != stateStreaming {
		return nil
	}
	select {
	case <-r.checkNow: // a session started streaming
	default:
		if time.Since(g.last) < r.cfg.FailoverCheckInterval {
			return nil
		}
	}
	g.last = time.Now()
	return r.checkProtection(ctx, conn, &g.watch)
}

// checkProtection reads whether the slot would survive a promotion, sets
// eventforge_slot_failover_ready (0 also where the server has no failover
// slots or they are off: a promotion loses the slot there) and logs when
// the answer changes.
func (r *Relay) checkProtection(ctx context.Context, conn *pgx.Conn, w *protectionWatch) error {
	var standby *pgx.Conn
	if r.cfg.StandbyURL != "" {
		c, err := connectSQL(ctx, r.cfg.StandbyURL)
		if err != nil {
			r.log.Warn("failover check: the standby does not answer", "err", err)
		} else {
			standby = c
			defer closeConn(ctx, c.Close)
		}
	}
	var sq slots.Querier
	if standby != nil {
		sq = standby
	}
	p, err := slots.CheckProtection(ctx, conn, sq, r.cfg.Slot)
	if err != nil {
		return fmt.Errorf("failover check: %w", err)
	}
	r.m.slotGauges.ObserveProtection(p)
	r.sayProtection(p, w)
	return nil
}

// sayProtection logs a protection reading when it differs from the last
// one: a warning when a standby streams from the primary but a promotion
// would lose the slot.
func (r *Relay) sayProtection(p slots.Protection, w *protectionWatch) {
	problems := strings.Join(p.Problems(), "; ")
	if problems == w.said {
		return
	}
	w.said = problems
	switch {
	case problems == "":
		r.log.Info("the slot is protected: it survives the promotion of a standby", "standby_slots", strings.Join(p.StandbySlots, ","))
	case p.Standbys > 0:
		r.log.Warn(fmt.Sprintf("%d standby streams from this server, but a promotion would lose slot %s or publish events the promoted server never had: %s (docs/operations.md#failover)",
			p.Standbys, r.cfg.Slot, problems))
	default:
		r.log.Info("the slot is not protected against failover", "why", problems)
	}
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The Runner tells a poison event from an outage by evidence, not by the
// type of an error: after an apply fails it asks the database itself (probe)
// whether it is reachable, writable and has the inbox; and before it
// dead-letters an event it looks at the events behind it (partitionWorker.alone).

// DefaultProbeTimeout bounds the database probe after a failed apply.
const DefaultProbeTimeout = 5 * time.Second

// probeSQL reads, in one round trip, whether the session may write, whether
// processed_events exists (resolved through the search_path like the inbox
// statements) and whether the role may insert into it.
const probeSQL = `SELECT current_setting('transaction_read_only') = 'on',
	to_regclass('processed_events') IS NOT NULL,
	coalesce(has_table_privilege(to_regclass('processed_events'), 'INSERT'), false)`

// Errors of the probe; each makes the partitions wait.
var (
	errReadOnly      = errors.New("the database is read-only (a standby, or default_transaction_read_only)")
	errNoInbox       = errors.New("table processed_events not found")
	errInboxReadOnly = errors.New("the role may not INSERT into processed_events")
)

// verdict is what the Runner makes of a failed apply.
type verdict struct {
	kind kind
	// why is the evidence: the probe's error for a database that does
	// not work, else the apply's error.
	why error
}

// judge decides how to treat err, a failed apply: a database the probe
// finds not working makes the partition wait whatever err says; otherwise
// err's classification decides.
func (r *Runner) judge(ctx context.Context, err error) verdict {
	if perr := r.probe(ctx); perr != nil {
		k := kindUnavailable
		if errors.Is(perr, errNoInbox) {
			k = kindSchema
		}
		return verdict{kind: k, why: perr}
	}
	return verdict{kind: classify(err), why: err}
}

// probe asks the database, through the Runner's pool and within
// ProbeTimeout, whether it works for the Runner: nil when it is reachable,
// writable, has processed_events and lets the role insert into it.
func (r *Runner) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(r.cfg.ApplyTimeout, r.cfg.ProbeTimeout))
	defer cancel()
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	defer rollback(ctx, tx)
	var readOnly, inbox, insert bool
	if err := tx.QueryRow(ctx, probeSQL).Scan(&readOnly, &inbox, &insert); err != nil {
		return fmt.Errorf("database probe: %w", err)
	}
	switch {
	case readOnly:
		return errReadOnly
	case !inbox:
		return fmt.Errorf("%w: %w", errNoInbox, errRunMigrate)
	case !insert:
		return errInboxReadOnly
	}
	return nil
}

// sameCause reports whether two failures have the same cause: the same
// SQLSTATE, or else the same innermost error once the numbers, quoted text
// and UUIDs that name an event are left out.
func sameCause(a, b error) bool { return causeOf(a) == causeOf(b) }

var (
	uuidPattern   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	quotedPattern = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	numberPattern = regexp.MustCompile(`[0-9]+`)
)

// causeOf is the cause of err as sameCause compares it.
func causeOf(err error) string {
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return "SQLSTATE " + pe.Code
	}
	inner := innermost(err)
	text := uuidPattern.ReplaceAllString(inner.Error(), "<uuid>")
	text = quotedPattern.ReplaceAllString(text, `"…"`)
	text = numberPattern.ReplaceAllString(text, "#")
	return fmt.Sprintf("%T: %s", inner, text)
}

// innermost follows err's chain (the first branch of a joined error) to its
// end.
func innermost(err error) error {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}

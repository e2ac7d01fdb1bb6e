package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// txnSample bounds the rows that may still arrive after a position: oldest
// is the start of the oldest transaction open in the database when the
// sample was taken, and lsn the WAL insert position read right after. A
// transaction whose commit record ends after lsn had not committed when
// oldest was read, so it was open then (counted) or began later: its rows'
// created_at, which is the transaction's start, are at or after oldest
// (docs/guarantees.md#a-lost-slot-costs-seconds-of-duplicates-not-an-hour).
type txnSample struct {
	lsn    pglogrepl.LSN
	oldest time.Time
}

// maxSamples bounds the samples kept while the relay lags: the oldest ones
// are merged (keeping the earliest start), which only widens the margin.
const maxSamples = 1024

// sampleTxns reads a txnSample; ok is false when the relay's role cannot
// see the transaction start of other roles' sessions (it needs
// pg_read_all_stats), so that no sample could bound them.
func sampleTxns(ctx context.Context, conn *pgx.Conn) (s txnSample, ok bool, err error) {
	if err := conn.QueryRow(ctx, `SELECT rolsuper OR pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER')
		FROM pg_roles WHERE rolname = current_user`).Scan(&ok); err != nil || !ok {
		return s, false, err
	}
	// Two statements, in this order: the activity first, then the WAL.
	if err := conn.QueryRow(ctx, `SELECT least(clock_timestamp(), min(xact_start)) FROM pg_stat_activity
		WHERE datname = current_database()`).Scan(&s.oldest); err != nil {
		return s, false, fmt.Errorf("read the oldest open transaction: %w", err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return s, false, fmt.Errorf("read the WAL insert position: %w", err)
	}
	if s.lsn, err = pglogrepl.ParseLSN(lsn); err != nil {
		return s, false, err
	}
	return s, true, nil
}

// samples are the txnSamples of one server, oldest first.
type samples []txnSample

// add appends s, merging the two oldest when there are too many.
func (ss samples) add(s txnSample) samples {
	ss = append(ss, s)
	if len(ss) > maxSamples {
		ss[1] = txnSample{lsn: ss[1].lsn, oldest: minTime(ss[0].oldest, ss[1].oldest)}
		ss = ss[1:]
	}
	return ss
}

// since is the recover_since of confirmed position p: the oldest start of
// the latest sample taken before p's commit record ended (lsn < p), or
// false when there is none. Samples older than that one can no longer
// serve a later position and are dropped.
func (ss samples) since(p pglogrepl.LSN) (samples, time.Time, bool) {
	i := -1
	for j, s := range ss {
		if s.lsn < p {
			i = j
		}
	}
	if i < 0 {
		return ss, time.Time{}, false
	}
	return ss[i:], ss[i].oldest, true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

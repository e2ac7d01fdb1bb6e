package prune_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/prune"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

const day = 24 * time.Hour

// logBatches records, per DELETE statement on the outbox, its transaction
// and how many rows it removed.
func logBatches(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	exec(t, conn, `CREATE TABLE prune_log (txid bigint NOT NULL, n bigint NOT NULL)`)
	exec(t, conn, `CREATE FUNCTION log_prune() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO prune_log SELECT txid_current(), count(*) FROM old_rows; RETURN NULL; END $$`)
	exec(t, conn, `CREATE TRIGGER log_prune AFTER DELETE ON outbox REFERENCING OLD TABLE AS old_rows
		FOR EACH STATEMENT EXECUTE FUNCTION log_prune()`)
}

func TestPruneDeletesOldRowsInBatchesOfShortTransactions(t *testing.T) {
	t.Parallel()
	_, conn, slot := confirmedDatabase(t)
	logBatches(t, conn)

	insertRows(t, conn, 2300, 2*day)
	insertRows(t, conn, 40, 2*time.Hour) // younger than --older-than
	insertRows(t, conn, 10, 0)
	// A rejected event stays for inspection even when old.
	exec(t, conn, `INSERT INTO outbox_rejected (event_id, lsn, topic, reason)
		SELECT event_id, '0/1', 'orders', 'too large' FROM outbox WHERE created_at < now() - interval '1 day' LIMIT 1`)

	res, err := prune.Run(t.Context(), conn, prune.Config{OlderThan: day, BatchSize: 500}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 2299 || res.Batches != 5 || res.Kept != 1 {
		t.Errorf("result = %+v, want 2299 deleted in 5 batches, 1 kept", res)
	}
	if len(res.Slots) != 1 || res.Slots[0] != slot {
		t.Errorf("checked slots %v, want [%s]", res.Slots, slot)
	}
	if left := count(t, conn, "SELECT count(*) FROM outbox"); left != 51 {
		t.Errorf("%d rows left, want 40+10 young and 1 rejected", left)
	}
	if n := count(t, conn, "SELECT count(*) FROM outbox o JOIN outbox_rejected r USING (event_id)"); n != 1 {
		t.Errorf("rejected row pruned")
	}
	// One transaction per batch, none above the batch size.
	var txs, biggest, total int64
	err = conn.QueryRow(t.Context(), "SELECT count(DISTINCT txid), max(n), sum(n) FROM prune_log WHERE n > 0").Scan(&txs, &biggest, &total)
	if err != nil {
		t.Fatal(err)
	}
	if txs != 5 || biggest != 500 || total != 2299 {
		t.Errorf("deletes ran in %d transactions (largest %d rows, %d in all), want 5 of at most 500", txs, biggest, total)
	}
}

func TestPruneNeitherBlocksNorWaitsForWriters(t *testing.T) {
	t.Parallel()
	url, conn, _ := confirmedDatabase(t)
	insertRows(t, conn, 3000, 2*day)

	// Another transaction holds one old row locked for the whole prune.
	holder := connect(t, url)
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var locked string
	if err := tx.QueryRow(t.Context(), "SELECT event_id::text FROM outbox ORDER BY created_at LIMIT 1 FOR UPDATE").Scan(&locked); err != nil {
		t.Fatal(err)
	}

	// Writers insert young rows the whole time; a lock wait over 1s fails them.
	writer := connect(t, url)
	exec(t, writer, "SET lock_timeout = '1s'")
	var (
		stopped  atomic.Bool
		inserted atomic.Int64
		wg       sync.WaitGroup
		werr     error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Not cancelled mid-statement, so the count matches the commits.
		for !stopped.Load() {
			_, err := writer.Exec(context.Background(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
				VALUES (gen_random_uuid(), 'orders', 'young', 'order.created', '{}')`)
			if err != nil {
				werr = err
				return
			}
			inserted.Add(1)
		}
	}()
	for inserted.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	pctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := prune.Run(pctx, conn, prune.Config{OlderThan: day, BatchSize: 100}, discard)
	before := inserted.Load()
	time.Sleep(20 * time.Millisecond) // the writer still runs after the prune
	stopped.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("prune beside a locked row and a writer: %v", err)
	}
	if werr != nil {
		t.Fatalf("writer failed during the prune: %v", werr)
	}
	if res.Deleted != 2999 || res.Kept != 1 {
		t.Errorf("result = %+v, want 2999 deleted and the locked row kept", res)
	}
	if before == 0 || inserted.Load() == 0 {
		t.Fatal("writer inserted nothing")
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "SELECT count(*) FROM outbox WHERE aggregate_id = 'young'"); n != inserted.Load() {
		t.Errorf("%d young rows left, %d inserted", n, inserted.Load())
	}
	if n := count(t, conn, "SELECT count(*) FROM outbox WHERE event_id = $1::uuid", locked); n != 1 {
		t.Error("the locked row is gone")
	}
}

func TestPruneDryRunDeletesNothing(t *testing.T) {
	t.Parallel()
	_, conn, _ := confirmedDatabase(t)
	insertRows(t, conn, 120, 3*day)
	insertRows(t, conn, 7, time.Hour)

	res, err := prune.Run(t.Context(), conn, prune.Config{OlderThan: 2 * day, DryRun: true}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 120 || res.Batches != 0 || res.Kept != 0 {
		t.Errorf("dry run = %+v, want 120 would-be deletions", res)
	}
	if n := count(t, conn, "SELECT count(*) FROM outbox"); n != 127 {
		t.Errorf("dry run left %d rows, want 127", n)
	}
}

func TestPruneGuardRefuses(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, url string, conn *pgx.Conn)
		olderThan time.Duration
		want      string
	}{
		{
			name:  "no relay has run",
			setup: func(*testing.T, string, *pgx.Conn) {},
			want:  "relay_state is empty",
		},
		{
			name: "slot missing although the relay streamed from it",
			setup: func(t *testing.T, _ string, conn *pgx.Conn) {
				exec(t, conn, "INSERT INTO relay_state (slot_name, confirmed_lsn) VALUES ('gone_slot', '0/10')")
			},
			want: "replication slot gone_slot is missing",
		},
		{
			name: "relay not confirming",
			setup: func(t *testing.T, url string, _ *pgx.Conn) {
				slotstest.Create(t, url, testenv.UniqueName("idle"), true)
			},
			want: "has not confirmed WAL position",
		},
		{
			name: "one of two relays not confirming",
			setup: func(t *testing.T, url string, conn *pgx.Conn) {
				live := testenv.UniqueName("a_live")
				slotstest.Create(t, url, live, true)
				slotstest.KeepConfirming(t, url, live)
				slotstest.Create(t, url, testenv.UniqueName("b_idle"), true)
			},
			want: "has not confirmed WAL position",
		},
		{
			name:      "transaction open since before the cutoff",
			olderThan: time.Second,
			setup: func(t *testing.T, url string, conn *pgx.Conn) {
				slot := testenv.UniqueName("slot")
				slotstest.Create(t, url, slot, true)
				slotstest.KeepConfirming(t, url, slot)
				tx, err := connect(t, url).Begin(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
				if _, err := tx.Exec(t.Context(), "SELECT 1"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(1500 * time.Millisecond)
			},
			want: "open since",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := env.NewDatabase(t)
			conn := connect(t, url)
			insertRows(t, conn, 50, 10*day)
			tc.setup(t, url, conn)
			age := tc.olderThan
			if age == 0 {
				age = day
			}
			res, err := prune.Run(t.Context(), conn, prune.Config{OlderThan: age, RelayWait: time.Second}, discard)
			if !errors.Is(err, prune.ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrUnsafe with %q", err, tc.want)
			}
			if res.Deleted != 0 {
				t.Errorf("deleted %d rows despite refusing", res.Deleted)
			}
			if n := count(t, conn, "SELECT count(*) FROM outbox"); n != 50 {
				t.Errorf("%d rows left, want all 50", n)
			}
		})
	}
}

// A walsender that has streamed for longer than --older-than is no open
// client transaction: a running relay must not make the guard refuse.
func TestPruneBesideAStreamingWalsender(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	slot := testenv.UniqueName("slot")
	slotstest.Create(t, url, slot, true)
	streamer := testenv.UniqueName("streamer")
	slotstest.Create(t, url, streamer, false)
	slotstest.Hold(t, url, streamer)
	slotstest.KeepConfirming(t, url, slot)
	insertRows(t, conn, 30, 10*time.Second)
	time.Sleep(1500 * time.Millisecond)

	res, err := prune.Run(t.Context(), conn, prune.Config{OlderThan: time.Second}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 30 {
		t.Fatalf("deleted %d, want 30", res.Deleted)
	}
}

// confirmedDatabase is a fresh migrated database with a slot whose
// confirmed position keeps up with the WAL, so the relay guard lets prune
// delete what is old enough.
func confirmedDatabase(t *testing.T) (url string, conn *pgx.Conn, slot string) {
	t.Helper()
	url = testenv.Shared(t).NewDatabase(t)
	conn = connect(t, url)
	slot = testenv.UniqueName("slot")
	slotstest.Create(t, url, slot, true)
	slotstest.KeepConfirming(t, url, slot)
	return url, conn, slot
}

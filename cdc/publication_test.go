package cdc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// partitionedOutbox creates part.outbox, partitioned by created_at into two
// partitions (before and after now), and a publication of it.
func partitionedOutbox(t *testing.T, url, publication string, viaRoot bool) {
	t.Helper()
	db := connect(t, url)
	mustExec(t, db, "CREATE SCHEMA part")
	mustExec(t, db, `CREATE TABLE part.outbox (event_id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb NOT NULL DEFAULT '{}',
		created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (event_id, created_at)) PARTITION BY RANGE (created_at)`)
	mustExec(t, db, "CREATE TABLE part.outbox_old PARTITION OF part.outbox FOR VALUES FROM (MINVALUE) TO ('2000-01-01')")
	mustExec(t, db, "CREATE TABLE part.outbox_new PARTITION OF part.outbox FOR VALUES FROM ('2000-01-01') TO (MAXVALUE)")
	via := "false"
	if viaRoot {
		via = "true"
	}
	mustExec(t, db, "CREATE PUBLICATION "+publication+" FOR TABLE part.outbox WITH (publish = 'insert', publish_via_partition_root = "+via+")")
}

// TestRefusesOutboxNotInPublication: an outbox table the publication does not
// cover would have every insert skipped and confirmed past. The relay stops
// with one line naming the table, the publication and the fix.
func TestRefusesOutboxNotInPublication(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	mustExec(t, db, "CREATE TABLE public.outbox2 (LIKE public.outbox INCLUDING ALL)")
	for _, tc := range []struct{ table, want string }{
		{"public.outbox2", "outbox table public.outbox2 is not in publication eventforge_outbox"},
		{"public.nosuch", "outbox table public.nosuch does not exist"},
	} {
		cfg := testConfig(t, url, env.Brokers)
		cfg.OutboxTable = tc.table
		err := runUntilFatal(t, cfg)
		var fe *FatalError
		if !errors.As(err, &fe) || !errors.Is(err, ErrNotPublished) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Run with --outbox-table %s = %v, want a one-line FatalError %q", tc.table, err, tc.want)
		}
		if slotConfirmed(t, db, cfg.Slot) != 0 {
			t.Fatalf("a slot was created for an outbox the publication does not cover")
		}
	}
}

// TestRefusesPartitionedOutboxPublishedPerPartition: with
// publish_via_partition_root = false the rows arrive under the partitions'
// names and would all be skipped.
func TestRefusesPartitionedOutboxPublishedPerPartition(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	partitionedOutbox(t, url, "part_pub", false)
	cfg := testConfig(t, url, env.Brokers)
	cfg.OutboxTable, cfg.Publication = "part.outbox", "part_pub"
	err := runUntilFatal(t, cfg)
	if !errors.Is(err, ErrNotPublished) || !strings.Contains(err.Error(), "publish_via_partition_root = true") {
		t.Fatalf("Run = %v, want ErrNotPublished naming publish_via_partition_root", err)
	}
	// A partition of it, published under the parent's name, is refused too.
	db := connect(t, url)
	mustExec(t, db, "ALTER PUBLICATION part_pub SET (publish_via_partition_root = true)")
	cfg = testConfig(t, url, env.Brokers)
	cfg.OutboxTable, cfg.Publication = "part.outbox_new", "part_pub"
	err = runUntilFatal(t, cfg)
	if !errors.Is(err, ErrNotPublished) || !strings.Contains(err.Error(), "--outbox-table part.outbox") {
		t.Fatalf("Run on a partition = %v, want ErrNotPublished naming the parent", err)
	}
}

// TestPartitionedOutboxStreamsAndBackfills: a range-partitioned outbox
// published via its root streams inserts into every partition, and rows
// committed before the slot are backfilled from the snapshot.
func TestPartitionedOutboxStreamsAndBackfills(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	partitionedOutbox(t, url, "part_pub", true)
	db := connect(t, url)
	insert := `INSERT INTO part.outbox (event_id, aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES ($1, 'orders', $2, 'order.created', '{}', $3)`
	want := map[uuid.UUID]int{}
	add := func(key string, at time.Time) {
		id := uuid.New()
		mustExec(t, db, insert, id, key, at)
		want[id] = len(want)
	}
	old := time.Date(1999, 6, 1, 0, 0, 0, 0, time.UTC)
	add("a", old)        // partition outbox_old, before the slot
	add("b", time.Now()) // partition outbox_new, before the slot
	cfg := testConfig(t, url, env.Brokers)
	cfg.OutboxTable, cfg.Publication = "part.outbox", "part_pub"
	cfg.BackfillAll = true
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	add("a", old.Add(time.Hour)) // streamed, into outbox_old
	add("b", time.Now())         // streamed, into outbox_new
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, want, 30*time.Second)
}

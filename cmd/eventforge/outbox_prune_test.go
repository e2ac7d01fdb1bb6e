package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/prune"
	"github.com/eventforge/eventforge/internal/testsupport/slotstest"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestOutboxPruneCommand(t *testing.T) {
	t.Parallel()
	url := testenv.Shared(t).NewDatabase(t)
	conn := opsConn(t, url)
	if _, err := conn.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, created_at)
		SELECT gen_random_uuid(), 'orders', 'o', 'order.created', '{}'::jsonb, now() - interval '9 days' FROM generate_series(1, 25)
		UNION ALL SELECT gen_random_uuid(), 'orders', 'o', 'order.created', '{}'::jsonb, now() FROM generate_series(1, 5)`); err != nil {
		t.Fatal(err)
	}
	left := func() int {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM outbox").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, err := runOpsCmd(t, "outbox", "prune", "--pg-url", url); err == nil || !strings.Contains(err.Error(), "--older-than") {
		t.Fatalf("without --older-than: %v", err)
	}
	// No relay has streamed from this database: nothing shows the rows were published.
	_, err := runOpsCmd(t, "outbox", "prune", "--pg-url", url, "--older-than", "168h", "--relay-wait", "1s")
	if !errors.Is(err, prune.ErrUnsafe) {
		t.Fatalf("prune without a relay: %v, want a refusal", err)
	}

	slot := testenv.UniqueName("relay")
	slotstest.Create(t, url, slot, true)
	slotstest.KeepConfirming(t, url, slot)
	out, err := runOpsCmd(t, "outbox", "prune", "--pg-url", url, "--older-than", "168h", "--dry-run")
	if err != nil || !strings.Contains(out, "dry run: would prune 25 outbox rows") || left() != 30 {
		t.Fatalf("dry run: %q, %v, %d rows left", out, err, left())
	}
	out, err = runOpsCmd(t, "outbox", "prune", "--pg-url", url, "--older-than", "168h", "--batch-size", "10")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "pruned 25 outbox rows") || !strings.Contains(out, "in 3 batches") || !strings.Contains(out, slot) {
		t.Errorf("output: %q", out)
	}
	if n := left(); n != 5 {
		t.Errorf("%d rows left, want the 5 young ones", n)
	}
}

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestMigrateDemoFlag: `eventforge migrate` creates no orders table;
// EVENTFORGE_DEMO=true (the twin of --demo) adds it.
func TestMigrateDemoFlag(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Shared(t).NewEmptyDatabase(t)
	admin := opsConn(t, dbURL)
	hasOrders := func() bool {
		var ok bool
		if err := admin.QueryRow(t.Context(), "SELECT to_regclass('orders') IS NOT NULL").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	run := func(env ...string) string {
		cmd := exec.CommandContext(t.Context(), testenv.Binary(t), "migrate", "--pg-url", dbURL)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("migrate %v: %v\n%s", env, err, out)
		}
		return string(out)
	}
	run()
	if hasOrders() {
		t.Fatal("migrate without --demo created orders")
	}
	if out := run("EVENTFORGE_DEMO=true"); !strings.Contains(out, "applied demo_0001_orders") {
		t.Errorf("migrate with EVENTFORGE_DEMO=true printed %q, want the demo's migration applied", out)
	}
	if !hasOrders() {
		t.Fatal("migrate with EVENTFORGE_DEMO=true created no orders")
	}
}

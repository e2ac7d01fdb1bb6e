package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLocalServicesFailoverDrill runs make up's failover drill on a state
// folder of its own: STANDBY=1 (PostgreSQL 17) gives a primary with a
// streaming standby set up for slot synchronisation, named in local.env; a
// make up without STANDBY then removes the standby and what the primary
// kept for it; down leaves no process behind. (KAFKA_NODES=3 starts the
// cluster of StartKafkaCluster; make chaos runs on it. Starting three
// brokers here would double the test's time.)
func TestLocalServicesFailoverDrill(t *testing.T) {
	t.Parallel()
	Shared(t)
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(stateDir(root), "private", "drill-test-"+UniqueName("s")[2:])
	// The scripts' environment, not the process's (the test runs beside
	// others): its own state folder, and the shared folder's caches.
	env := append(sharedCaches(root), "EVENTFORGE_STATE_DIR="+state,
		"EVENTFORGE_PG_VERSION=17", "EVENTFORGE_KAFKA_NODES=", "EVENTFORGE_STANDBY=1")
	t.Cleanup(func() {
		_, _ = runScriptEnv(root, env, "down.sh")
		removeAll(filepath.Join(state, "pg-17.standby"))
		removeAll(filepath.Join(state, "pg-17"))
		_ = os.RemoveAll(state)
	})
	vars := up(t, root, env, state)
	if vars["EVENTFORGE_STANDBY_URL"] == "" {
		t.Fatalf("local.env names no standby: %v", vars)
	}
	var inRecovery bool
	var syncSlots string
	standby := connect(t, vars["EVENTFORGE_STANDBY_URL"])
	if err := standby.QueryRow(t.Context(), "SELECT pg_is_in_recovery(), current_setting('sync_replication_slots')").Scan(&inRecovery, &syncSlots); err != nil || !inRecovery || syncSlots != "on" {
		t.Fatalf("standby: in recovery %v, sync_replication_slots %q (%v): want a standby synchronising slots", inRecovery, syncSlots, err)
	}
	if got := primarySetting(t, vars["EVENTFORGE_PG_URL"]); got != "pg_17_standby" {
		t.Fatalf("primary's synchronized_standby_slots = %q, want the standby's physical slot", got)
	}

	env = append(env, "EVENTFORGE_STANDBY=") // the last value counts
	vars = up(t, root, env, state)
	if _, err := os.Stat(filepath.Join(state, "pg-17.standby")); !os.IsNotExist(err) || vars["EVENTFORGE_STANDBY_URL"] != "" {
		t.Fatalf("the standby is still there after make up without STANDBY (stat: %v, local.env: %v)", err, vars)
	}
	if got := primarySetting(t, vars["EVENTFORGE_PG_URL"]); got != "" {
		t.Fatalf("primary's synchronized_standby_slots = %q after the standby was removed, want none", got)
	}

	if out, err := runScriptEnv(root, env, "down.sh"); err != nil {
		t.Fatalf("down.sh: %v\n%s", err, out)
	}
	if left := processesMentioning(t, state); len(left) > 0 {
		t.Fatalf("processes left after down: %v", left)
	}
}

// sharedCaches points the scripts of a test's own state folder at the
// shared folder's caches of server binaries and Kafka jars (unless the
// environment names others), so a test does not resolve them again.
func sharedCaches(root string) []string {
	shared := stateDir(root)
	var env []string
	for _, c := range []struct{ env, dir string }{{"EVENTFORGE_PG_BINARIES", "pg-binaries"}, {"EVENTFORGE_KAFKA_LIBS", "kafka-libs"}} {
		if os.Getenv(c.env) == "" {
			env = append(env, c.env+"="+filepath.Join(shared, c.dir))
		}
	}
	return env
}

func up(t *testing.T, root string, env []string, state string) map[string]string {
	t.Helper()
	if out, err := runScriptEnv(root, env, "up.sh"); err != nil {
		t.Fatalf("up.sh: %v\n%s", err, out)
	}
	vars, err := readEnvFile(filepath.Join(state, "local.env"))
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// primarySetting is the primary's synchronized_standby_slots, and fails
// the test when a physical slot is left without it naming one.
func primarySetting(t *testing.T, url string) string {
	t.Helper()
	var slots string
	var physical int
	err := connect(t, url).QueryRow(t.Context(),
		"SELECT current_setting('synchronized_standby_slots'), (SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical')").Scan(&slots, &physical)
	if err != nil {
		t.Fatal(err)
	}
	if slots == "" && physical != 0 {
		t.Errorf("%d physical slots left on the primary with no standby", physical)
	}
	return slots
}

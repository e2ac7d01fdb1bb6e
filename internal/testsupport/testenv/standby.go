package testenv

import (
	"os"
	"strings"
	"testing"
)

// StartPostgresVersion is StartPostgres on PostgreSQL major version
// version ("16", "17", "18": server binaries from Maven Central;
// "" for the machine's or EVENTFORGE_PG_VERSION's).
func StartPostgresVersion(t testing.TB, version string) *Postgres {
	t.Helper()
	if version == "" {
		return StartPostgres(t)
	}
	// pg.sh reads the version from its environment: this cluster's scripts
	// get it, the process keeps its own (parallel tests may run others).
	return startPostgres(t, []string{"EVENTFORGE_PG_VERSION=" + version})
}

// StartStandby creates a streaming standby of p (a physical slot on p, and
// from PostgreSQL 17 slot synchronisation: sync_replication_slots on the
// standby, synchronized_standby_slots naming it on p), starts it and waits
// until it streams. It is removed at cleanup.
func (p *Postgres) StartStandby(t testing.TB) *Postgres {
	t.Helper()
	root, dir := privateDir(t, "pg")
	s := &Postgres{root: root, dir: dir, env: p.env} // the primary's version
	t.Cleanup(func() {
		_, _ = runScriptEnv(root, s.env, "pg.sh", "kill", dir)
		removeAll(dir)
	})
	s.run(t, "standby", p.dir)
	out, err := runScriptEnv(root, s.env, "pg.sh", "url", dir)
	if err != nil {
		t.Fatalf("pg.sh url: %v\n%s", err, out)
	}
	s.url = strings.TrimSpace(string(out))
	return s
}

// Promote promotes a standby and waits until it accepts writes.
func (p *Postgres) Promote(t testing.TB) { p.run(t, "promote") }

// Kill stops the server immediately, as a crash would.
func (p *Postgres) Kill(t testing.TB) { p.run(t, "kill") }

// Version is the major version the private clusters of this test run get:
// EVENTFORGE_PG_VERSION, or "" for the machine's.
func Version() string { return os.Getenv("EVENTFORGE_PG_VERSION") }

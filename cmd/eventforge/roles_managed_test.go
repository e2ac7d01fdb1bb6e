package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestRolesReplicationThroughRDSRole: sql/roles.sql with
// replication_role=rds_replication makes the relay's login role a member of
// rds_replication instead of giving it REPLICATION, as Amazon RDS needs. On
// this self-hosted server, which never passes REPLICATION on through
// membership, `cdc run` then stops at start-up saying exactly that, and
// with --replication-check catalog its check accepts the membership (the
// relay itself then fails at its replication connection).
func TestRolesReplicationThroughRDSRole(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	admin := opsConn(t, dbURL)
	testenv.EnsureRole(t, admin, "rds_replication")
	r := createRoles(t, dbURL, admin, "replication_role=rds_replication")
	var attr, member bool
	err := admin.QueryRow(t.Context(), `SELECT rolreplication, pg_has_role(rolname, 'rds_replication', 'MEMBER')
		FROM pg_roles WHERE rolname = $1`, r.relay).Scan(&attr, &member)
	if err != nil || attr || !member {
		t.Fatalf("relay role: REPLICATION %v, member of rds_replication %v (%v); want false, true", attr, member, err)
	}
	run := func(extra ...string) string {
		bin := testenv.Binary(t) // built before the deadline starts
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		args := append([]string{"cdc", "run", "--slot", testenv.UniqueName("slot"), "--metrics-addr", ""}, extra...)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "EVENTFORGE_PG_URL="+r.url(t, dbURL, r.relay), "EVENTFORGE_KAFKA_BROKERS="+strings.Join(env.Brokers, ","))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("cdc run %v: exit %v, want status 1; stderr:\n%s", extra, err, stderr.String())
		}
		return stderr.String()
	}
	if out := run(); !strings.Contains(out, "it is a member of rds_replication, but this server refused it a replication connection") {
		t.Errorf("connect check: stderr\n%s\nwant the membership explained", out)
	}
	if out := run("--replication-check", "catalog"); strings.Contains(out, "lacks REPLICATION") || !strings.Contains(out, "replication connection") {
		t.Errorf("catalog check: stderr\n%s\nwant the check passed and the relay's replication connection refused", out)
	}
}

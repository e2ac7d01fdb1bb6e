package privileges_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventforge/eventforge/internal/shared/privileges"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// demoHandler is the statement of deploy/handlers/orders.yaml with the
// worker's five declared parameters.
var demoHandler = privileges.Statement{
	Name:      `handler "order.created"`,
	SQL:       `UPDATE orders SET status = 'processed', updated_at = now() WHERE id = $1`,
	ParamOIDs: []uint32{pgtype.TextOID, pgtype.JSONBOID, pgtype.UUIDOID, pgtype.TextOID, pgtype.JSONBOID},
}

// TestVerifyReportsExactlyWhatIsMissing: against a real database, a role
// granted everything of a set passes, and a role lacking some privileges is
// refused with exactly those, read from PostgreSQL's catalog (also through
// a group role, which is how sql/roles.sql grants).
func TestVerifyReportsExactlyWhatIsMissing(t *testing.T) {
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	admin := connect(t, dbURL)
	tests := []struct {
		name    string
		set     privileges.Set
		attrs   string   // CREATE ROLE attributes
		grants  []string // run with %[1]s = the role
		missing []string // "PRIVILEGE object"; "REPLICATION"
		denied  []string // names of refused statements
	}{
		{name: "relay, everything", set: privileges.Relay(true), attrs: "REPLICATION",
			grants: []string{"GRANT SELECT, INSERT, UPDATE ON relay_state TO %[1]s", "GRANT SELECT, INSERT ON outbox_rejected TO %[1]s"}},
		{name: "relay, no REPLICATION", set: privileges.Relay(true),
			grants:  []string{"GRANT SELECT, INSERT, UPDATE ON relay_state TO %[1]s", "GRANT SELECT, INSERT ON outbox_rejected TO %[1]s"},
			missing: []string{"REPLICATION"}},
		{name: "relay, no table privileges", set: privileges.Relay(false), attrs: "REPLICATION",
			grants:  []string{"GRANT SELECT ON relay_state TO %[1]s"},
			missing: []string{"INSERT relay_state", "UPDATE relay_state", "SELECT outbox_rejected", "INSERT outbox_rejected"}},
		{name: "worker through a group role", set: privileges.Worker([]privileges.Statement{demoHandler}),
			grants: []string{"CREATE ROLE %[1]s_g", "GRANT %[1]s_g TO %[1]s", "GRANT SELECT, INSERT ON processed_events TO %[1]s_g",
				"GRANT SELECT (id), UPDATE (status, updated_at) ON orders TO %[1]s_g"}},
		{name: "worker, INSERT only", set: privileges.Worker(nil),
			grants:  []string{"GRANT INSERT ON processed_events TO %[1]s"},
			missing: []string{"SELECT processed_events"}},
		{name: "worker, handler lacks UPDATE", set: privileges.Worker([]privileges.Statement{demoHandler}),
			grants: []string{"GRANT SELECT, INSERT ON processed_events TO %[1]s", "GRANT SELECT (id) ON orders TO %[1]s"},
			denied: []string{demoHandler.Name}},
		{name: "api, everything", set: privileges.API(),
			grants: []string{"GRANT SELECT, INSERT ON orders TO %[1]s", "GRANT INSERT ON outbox TO %[1]s", "GRANT SELECT, INSERT, UPDATE ON api_idempotency TO %[1]s"}},
		{name: "api, no INSERT on outbox", set: privileges.API(),
			grants:  []string{"GRANT SELECT, INSERT ON orders TO %[1]s", "GRANT SELECT ON outbox TO %[1]s", "GRANT SELECT, INSERT, UPDATE ON api_idempotency TO %[1]s"},
			missing: []string{"INSERT outbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			role := createRole(t, admin, tt.attrs, tt.grants)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g, err := tt.set.Verify(ctx, withUser(t, dbURL, role), nil)
			if len(tt.missing) == 0 && len(tt.denied) == 0 {
				if err != nil || g == nil {
					t.Fatalf("Verify: %v, want nil", err)
				}
				return
			}
			var me *privileges.MissingError
			if !errors.As(err, &me) {
				t.Fatalf("Verify: %v, want a *MissingError", err)
			}
			var got, gotDenied []string
			for _, n := range me.Missing {
				got = append(got, strings.TrimSpace(n.Privilege+" "+n.Object))
				if n.Kind == privileges.Replication {
					got[len(got)-1] = "REPLICATION"
				}
			}
			for _, d := range me.Denied {
				gotDenied = append(gotDenied, d.Name)
			}
			if !slices.Equal(got, tt.missing) || !slices.Equal(gotDenied, tt.denied) {
				t.Errorf("missing %q denied %q, want %q %q", got, gotDenied, tt.missing, tt.denied)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("role %q lacks", role)) {
				t.Errorf("message %q does not name the role", err)
			}
		})
	}
}

// TestVerifyRevokedHeartbeatFunction: EXECUTE on pg_logical_emit_message is
// checked only while heartbeats are on.
func TestVerifyRevokedHeartbeatFunction(t *testing.T) {
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	admin := connect(t, dbURL)
	if _, err := admin.Exec(context.Background(), "REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	role := createRole(t, admin, "REPLICATION", []string{
		"GRANT SELECT, INSERT, UPDATE ON relay_state TO %[1]s", "GRANT SELECT, INSERT ON outbox_rejected TO %[1]s"})
	u := withUser(t, dbURL, role)
	_, err := privileges.Relay(true).Verify(context.Background(), u, nil)
	if err == nil || !strings.Contains(err.Error(), "lacks EXECUTE on function pg_logical_emit_message(boolean,text,text)") {
		t.Errorf("with heartbeats: %v, want the function named", err)
	}
	if _, err := privileges.Relay(false).Verify(context.Background(), u, nil); err != nil {
		t.Errorf("without heartbeats: %v, want nil", err)
	}
}

// TestVerifyUnreachableIsSkipped: an unreachable server is the command's to
// report; Verify only logs it and still explains later 42501 errors.
func TestVerifyUnreachableIsSkipped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := privileges.API().Verify(ctx, "postgres://carol:s3cret@127.0.0.1:1/db?connect_timeout=2", nil)
	if err != nil || g == nil {
		t.Fatalf("Verify: %v, want a Guard and no error", err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// createRole creates a login role (cluster-wide, so uniquely named) and
// drops it, and a group named <role>_g if the grants made one, at cleanup.
func createRole(t *testing.T, admin *pgx.Conn, attrs string, grants []string) string {
	t.Helper()
	ctx := context.Background()
	role := testenv.UniqueName("priv")
	t.Cleanup(func() {
		for _, r := range []string{role, role + "_g"} {
			if _, err := admin.Exec(ctx, fmt.Sprintf("DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN DROP OWNED BY %[1]s; DROP ROLE %[1]s; END IF; END $$", r)); err != nil {
				t.Logf("drop role %s: %v", r, err)
			}
		}
	})
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN "+attrs); err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if _, err := admin.Exec(ctx, fmt.Sprintf(g, role)); err != nil {
			t.Fatalf("%s: %v", fmt.Sprintf(g, role), err)
		}
	}
	return role
}

// withUser is url logged in as role (the local cluster trusts loopback).
func withUser(t *testing.T, raw, role string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

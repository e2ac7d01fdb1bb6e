package privileges_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/privileges"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// replicationOnly is a set needing nothing but the right to replicate.
func replicationOnly(check privileges.ReplicationCheck) privileges.Set {
	return privileges.Set{Command: "the relay", Replication: check,
		Needs: []privileges.Need{{Kind: privileges.Replication, Why: "to create and read the replication slot"}}}
}

// TestVerifyReplicationThroughMembership: the catalog counts REPLICATION
// that comes from role membership (rds_replication, a configured role, any
// role with REPLICATION) besides the role's own attribute; the replication
// connection then decides, and on this self-hosted server, which never
// passes REPLICATION on through membership, it refuses the members with a
// message that says so. A role with neither is refused either way.
func TestVerifyReplicationThroughMembership(t *testing.T) {
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	admin := connect(t, dbURL)
	testenv.EnsureRole(t, admin, "rds_replication")
	tests := []struct {
		name   string
		attrs  string
		grants []string
		roles  []string // ReplicationCheck.Roles; nil: the default
		// want: "" accepted, else a part of the error
		catalog, probe string
	}{
		{name: "own attribute", attrs: "REPLICATION"},
		{name: "member of rds_replication", grants: []string{"GRANT rds_replication TO %[1]s"},
			probe: "it is a member of rds_replication, but this server refused it a replication connection"},
		{name: "member of a role with REPLICATION",
			grants: []string{"CREATE ROLE %[1]s_g NOLOGIN REPLICATION", "GRANT %[1]s_g TO %[1]s"},
			probe:  "_g, but this server refused it a replication connection"},
		{name: "member of a configured role", roles: []string{"a_role", "%[1]s_g"},
			grants: []string{"CREATE ROLE %[1]s_g NOLOGIN", "GRANT %[1]s_g TO %[1]s"},
			probe:  "_g, but this server refused it a replication connection"},
		{name: "member of a role not configured", roles: []string{"a_role"},
			grants:  []string{"CREATE ROLE %[1]s_g NOLOGIN", "GRANT %[1]s_g TO %[1]s"},
			catalog: "lacks REPLICATION", probe: "lacks REPLICATION"},
		{name: "neither", grants: []string{"GRANT pg_monitor TO %[1]s"},
			catalog: "lacks REPLICATION", probe: "lacks REPLICATION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			role := createRole(t, admin, tt.attrs, tt.grants)
			var roles []string
			for _, r := range tt.roles {
				roles = append(roles, strings.ReplaceAll(r, "%[1]s", role))
			}
			u := withUser(t, dbURL, role)
			for _, mode := range []struct {
				catalogOnly bool
				want        string
			}{{true, tt.catalog}, {false, tt.probe}} {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				_, err := replicationOnly(privileges.ReplicationCheck{Roles: roles, CatalogOnly: mode.catalogOnly}).Verify(ctx, u, nil)
				cancel()
				if mode.want == "" {
					if err != nil {
						t.Errorf("catalog only %v: %v, want accepted", mode.catalogOnly, err)
					}
					continue
				}
				if !errors.Is(err, privileges.ErrInsufficientPrivilege) || !strings.Contains(err.Error(), mode.want) {
					t.Errorf("catalog only %v: %v, want a missing privilege holding %q", mode.catalogOnly, err, mode.want)
				}
			}
		})
	}
}

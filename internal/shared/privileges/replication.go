package privileges

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultReplicationRoles are the group roles whose membership carries the
// right to replicate on managed services: Amazon RDS and Aurora grant it
// through rds_replication (their server honours the membership; PostgreSQL
// itself never inherits the REPLICATION attribute).
func DefaultReplicationRoles() []string { return []string{"rds_replication"} }

// ReplicationCheck is how Verify decides whether a role may replicate. The
// catalog answers first: the role's own SUPERUSER or REPLICATION attribute,
// or its membership (pg_has_role … 'MEMBER') in a role named in Roles or in
// any role that has REPLICATION. That answer is advisory: Verify then opens
// a replication connection and runs IDENTIFY_SYSTEM, and what the server
// does is final. Only when that probe says nothing (unreachable, no
// walsender free) does the catalog's answer stand.
type ReplicationCheck struct {
	// Roles are group roles whose membership counts as the right to
	// replicate. Default (nil): DefaultReplicationRoles.
	Roles []string
	// CatalogOnly skips the replication connection: the catalog's answer
	// is final. Default false.
	CatalogOnly bool
}

func (c ReplicationCheck) roles() []string {
	if c.Roles == nil {
		return DefaultReplicationRoles()
	}
	return c.Roles
}

// replicationQuery reads the role's own attributes and the roles it is a
// member of that carry REPLICATION or are named in $1.
const replicationQuery = `SELECT r.rolsuper OR r.rolreplication,
	coalesce((SELECT array_agg(g.rolname::text ORDER BY g.rolname) FROM pg_roles g
		WHERE g.oid <> r.oid AND pg_has_role(r.oid, g.oid, 'MEMBER')
		AND (g.rolreplication OR g.rolsuper OR g.rolname = ANY($1::text[]))), '{}')
	FROM pg_roles r WHERE r.rolname = current_user`

// replicationGrant is the catalog's answer.
type replicationGrant struct {
	attribute bool     // SUPERUSER or REPLICATION on the role itself
	via       []string // roles it is a member of that may carry the right
}

func (g replicationGrant) granted() bool { return g.attribute || len(g.via) > 0 }

func catalogReplication(ctx context.Context, q Querier, c ReplicationCheck) (replicationGrant, error) {
	var g replicationGrant
	if err := q.QueryRow(ctx, replicationQuery, c.roles()).Scan(&g.attribute, &g.via); err != nil {
		return g, fmt.Errorf("check privileges: %w", err)
	}
	return g, nil
}

// probe is what a replication connection attempt showed.
type probe int

const (
	probeInconclusive probe = iota // unreachable, no walsender free, a pooler…
	probeAccepted                  // IDENTIFY_SYSTEM answered
	probeRefused                   // SQLSTATE 42501: the role may not replicate
	probeNotAllowed                // class 28: authentication refused the replication connection
)

// probeReplication opens a logical replication connection as cfg's role
// and runs IDENTIFY_SYSTEM, what the relay does first.
func probeReplication(ctx context.Context, cfg *pgx.ConnConfig) (probe, error) {
	pc := cfg.Config.Copy()
	pc.RuntimeParams["replication"] = "database"
	pc.RuntimeParams["application_name"] = "eventforge-privileges"
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err == nil {
		_, err = pglogrepl.IdentifySystem(ctx, conn)
		_ = conn.Close(context.WithoutCancel(ctx))
	}
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return probeAccepted, nil
	case !errors.As(err, &pe):
		return probeInconclusive, err
	case pe.Code == pgerrcode.InsufficientPrivilege:
		return probeRefused, err
	case pgerrcode.IsInvalidAuthorizationSpecification(pe.Code):
		return probeNotAllowed, err
	}
	return probeInconclusive, err
}

// decideReplication turns the catalog's answer and the probe into the
// final one: nil when the role may replicate, a Need to report as missing
// when it may not, or an error the operator must fix elsewhere (the server's
// authentication rules).
func decideReplication(role string, need Need, g replicationGrant, p probe, perr error, log *slog.Logger) (*Need, error) {
	switch p {
	case probeAccepted:
		if !g.attribute {
			log.Info("REPLICATION granted through role membership", "role", role, "member_of", strings.Join(g.via, ","))
		}
		return nil, nil
	case probeRefused:
		if len(g.via) > 0 {
			need.Why += fmt.Sprintf(" (it is a member of %s, but this server refused it a replication connection: "+
				"PostgreSQL does not pass REPLICATION on through membership, only managed services such as Amazon RDS do for rds_replication; "+
				"ALTER ROLE %s REPLICATION, or see docs/managed-postgres.md)", strings.Join(g.via, ", "), pgx.Identifier{role}.Sanitize())
		}
		return &need, nil
	case probeNotAllowed:
		return nil, fmt.Errorf("PostgreSQL refused role %q a replication connection (replication=database) although it accepted a normal one; "+
			"check the server's authentication rules for such connections: %w", role, perr)
	}
	if !g.granted() {
		return &need, nil
	}
	if !g.attribute {
		log.Warn("REPLICATION assumed from role membership: the replication connection could not be tried",
			"role", role, "member_of", strings.Join(g.via, ","), "err", perr)
	}
	return nil, nil
}

// verifyReplication probes the server for s's Replication need and puts
// the final answer into me (which may be nil and is returned).
func (s Set) verifyReplication(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig, role string, me *MissingError, log *slog.Logger) (*MissingError, error) {
	i := slices.IndexFunc(s.Needs, func(n Need) bool { return n.Kind == Replication })
	if i < 0 || s.Replication.CatalogOnly {
		return me, nil
	}
	g, err := catalogReplication(ctx, conn, s.Replication)
	if err != nil {
		return nil, err
	}
	p, perr := probeReplication(ctx, cfg)
	missing, err := decideReplication(role, s.Needs[i], g, p, perr, log)
	if err != nil {
		return nil, err
	}
	if me != nil {
		me.Missing = slices.DeleteFunc(me.Missing, func(n Need) bool { return n.Kind == Replication })
	}
	if missing == nil {
		if me != nil && len(me.Missing) == 0 {
			return nil, nil
		}
		return me, nil
	}
	if me == nil {
		me = &MissingError{Role: role, Command: s.Command}
	}
	me.Missing = append([]Need{*missing}, me.Missing...)
	return me, nil
}

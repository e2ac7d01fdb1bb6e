package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/spf13/pflag"

	"github.com/eventforge/eventforge/internal/shared/privileges"
	"github.com/eventforge/eventforge/worker/sqlhandler"
)

// handlerParamOIDs are the handler parameters of the contract: $1
// aggregate_id text, $2 payload jsonb, $3 event_id uuid, $4 event_type text,
// $5 headers jsonb (as worker/sqlhandler declares them).
var handlerParamOIDs = []uint32{pgtype.TextOID, pgtype.JSONBOID, pgtype.UUIDOID, pgtype.TextOID, pgtype.JSONBOID}

// handlerBatchParamOIDs are the same parameters as arrays, for batch_sql.
var handlerBatchParamOIDs = []uint32{pgtype.TextArrayOID, pgtype.JSONBArrayOID, pgtype.UUIDArrayOID, pgtype.TextArrayOID, pgtype.JSONBArrayOID}

// handlerStatements are the statements of a handlers file, for the worker's
// start-up privilege check; none without a file.
func handlerStatements(spec *sqlhandler.Spec) []privileges.Statement {
	if spec == nil {
		return nil
	}
	var stmts []privileges.Statement
	for _, typ := range spec.EventTypes() {
		stmts = append(stmts, privileges.Statement{
			Name: `handler "` + typ + `"`, SQL: spec.Handlers[typ].SQL, ParamOIDs: handlerParamOIDs,
		})
		if b := spec.Handlers[typ].BatchSQL; b != "" {
			stmts = append(stmts, privileges.Statement{
				Name: `handler "` + typ + `" batch_sql`, SQL: b, ParamOIDs: handlerBatchParamOIDs,
			})
		}
	}
	return stmts
}

// replicationCheckFlags choose how `cdc run` checks its role's right to
// replicate (privileges.ReplicationCheck).
type replicationCheckFlags struct {
	roles []string
	mode  string
}

func (f *replicationCheckFlags) register(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.roles, "replication-roles", privileges.DefaultReplicationRoles(),
		"group roles whose membership counts as the right to replicate in the start-up check (Amazon RDS/Aurora: rds_replication), comma-separated; any role with REPLICATION counts too")
	fs.StringVar(&f.mode, "replication-check", "connect",
		"how the start-up check decides the right to replicate: connect (open a replication connection, IDENTIFY_SYSTEM; the server decides) or catalog (role attributes and memberships only)")
}

func (f *replicationCheckFlags) check() (privileges.ReplicationCheck, error) {
	c := privileges.ReplicationCheck{Roles: f.roles}
	switch f.mode {
	case "connect":
	case "catalog":
		c.CatalogOnly = true
	default:
		return c, fmt.Errorf("invalid --replication-check %q: want connect or catalog", f.mode)
	}
	if c.Roles == nil {
		c.Roles = []string{} // an explicitly empty list: memberships of REPLICATION roles only
	}
	return c, nil
}

package main

import (
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventforge/eventforge/internal/privileges"
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

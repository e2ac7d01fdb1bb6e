// Package privileges checks at start-up that a command's PostgreSQL role holds
// what the command needs, using PostgreSQL's own catalog (pg_roles,
// has_table_privilege, has_function_privilege), and turns a missing privilege
// met later (SQLSTATE 42501) into the same kind of message. The roles
// themselves are created by sql/roles.sql; SECURITY.md explains them.
//
// Imports (floor: shared library): internal/shared/pgconn only.
package privileges

// Kind is what a Need asks for.
type Kind int

const (
	// Replication is the right to open a replication connection: the
	// REPLICATION role attribute (a superuser has it implicitly).
	// PostgreSQL never inherits attributes from group roles, but managed
	// services grant the right through membership (Amazon RDS:
	// rds_replication), so Verify asks the server (see ReplicationCheck).
	Replication Kind = iota
	// Table is a privilege on a table, resolved through the role's
	// search_path exactly like the command's own unqualified queries.
	Table
	// Function is EXECUTE on a pg_catalog function.
	Function
)

// Need is one privilege a command needs, and what for.
type Need struct {
	Kind Kind
	// Object is the table name, or the function's signature as regprocedure
	// prints it (a later server version may append defaulted arguments).
	Object    string
	Privilege string // SELECT, INSERT, UPDATE, EXECUTE; empty for Replication
	Why       string // completes "<command> needs it …"
}

// Statement is a statement of the operator's (a worker handler) checked by
// planning it with EXPLAIN, which checks its privileges without running it.
type Statement struct {
	Name      string   // how errors name it, e.g. handler "order.created"
	SQL       string   // one statement with parameters $1…$n
	ParamOIDs []uint32 // the declared parameter types
}

// Set is everything one command needs.
type Set struct {
	Command     string // "the relay", "the worker", "the API"
	Needs       []Need
	Statements  []Statement
	Replication ReplicationCheck // how a Replication need is checked
}

// Relay is what `cdc run` needs. heartbeat is whether it emits heartbeat
// messages (--heartbeat-interval > 0). The relay needs nothing on the outbox
// table itself: pgoutput sends the published rows to a REPLICATION role
// without a table privilege check.
func Relay(heartbeat bool) Set {
	s := Set{Command: "the relay", Needs: []Need{
		{Kind: Replication, Why: "to create and read the replication slot"},
		{Kind: Table, Object: "relay_state", Privilege: "SELECT", Why: "to check the slot against the positions it confirmed before"},
		{Kind: Table, Object: "relay_state", Privilege: "INSERT", Why: "to record the positions it confirms"},
		{Kind: Table, Object: "relay_state", Privilege: "UPDATE", Why: "to record the positions it confirms"},
		{Kind: Table, Object: "outbox_rejected", Privilege: "SELECT", Why: "to skip events it rejected before"},
		{Kind: Table, Object: "outbox_rejected", Privilege: "INSERT", Why: "to record events it cannot publish"},
	}}
	if heartbeat {
		s.Needs = append(s.Needs, Need{Kind: Function, Object: "pg_logical_emit_message(boolean,text,text)",
			Privilege: "EXECUTE", Why: "to send heartbeats (or set --heartbeat-interval 0)"})
	}
	return s
}

// Worker is what `worker run` needs, with the statements of its handlers.
func Worker(handlers []Statement) Set {
	return Set{Command: "the worker", Needs: []Need{
		{Kind: Table, Object: "processed_events", Privilege: "INSERT", Why: "to record each applied event (the inbox)"},
		{Kind: Table, Object: "processed_events", Privilege: "SELECT", Why: "to tell new events from duplicates (RETURNING)"},
	}, Statements: handlers}
}

// API is what `api run` needs.
func API() Set {
	return Set{Command: "the API", Needs: []Need{
		{Kind: Table, Object: "orders", Privilege: "INSERT", Why: "to create orders"},
		{Kind: Table, Object: "orders", Privilege: "SELECT", Why: "to answer GET /orders/{id}"},
		{Kind: Table, Object: "outbox", Privilege: "INSERT", Why: "to write each order's event"},
		{Kind: Table, Object: "api_idempotency", Privilege: "SELECT", Why: "to answer retried requests (Idempotency-Key)"},
		{Kind: Table, Object: "api_idempotency", Privilege: "INSERT", Why: "to claim Idempotency-Keys"},
		{Kind: Table, Object: "api_idempotency", Privilege: "UPDATE", Why: "to store the answers of Idempotency-Key requests"},
	}}
}

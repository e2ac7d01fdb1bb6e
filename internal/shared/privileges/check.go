package privileges

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	ipg "github.com/eventforge/eventforge/internal/shared/pgconn"
)

// Catalog queries, one per kind of Need. A missing table or function is not
// reported here: each command reports a missing schema its own way ("run
// eventforge migrate").
const (
	tableQuery = `SELECT to_regclass($1) IS NOT NULL,
		coalesce(has_table_privilege(to_regclass($1)::oid, $2), false)`
	functionQuery = `SELECT count(*) > 0, coalesce(bool_or(has_function_privilege(p.oid, $2)), false)
		FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace
		AND (p.oid::regprocedure::text = $1 OR p.oid::regprocedure::text LIKE rtrim($1, ')') || ',%')`
)

// connectTimeout bounds the check's connection when the URL sets none.
const connectTimeout = 10 * time.Second

// Querier runs the catalog queries; *pgx.Conn is one.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check returns a *MissingError naming role when the role behind q lacks
// anything of s.Needs, nil when it has everything, as the catalog tells:
// REPLICATION through role membership counts here; Verify then asks the
// server itself.
func (s Set) Check(ctx context.Context, q Querier, role string) error {
	var missing []Need
	for _, n := range s.Needs {
		ok, err := s.has(ctx, q, n)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &MissingError{Role: role, Command: s.Command, Missing: missing}
}

// has reports whether the current role holds n (true too when n's object
// does not exist). REPLICATION is the catalog's advisory answer (see
// ReplicationCheck).
func (s Set) has(ctx context.Context, q Querier, n Need) (bool, error) {
	var exists, ok bool
	var err error
	switch n.Kind {
	case Replication:
		g, err := catalogReplication(ctx, q, s.Replication)
		return g.granted(), err
	case Table:
		err = q.QueryRow(ctx, tableQuery, n.Object, n.Privilege).Scan(&exists, &ok)
	case Function:
		err = q.QueryRow(ctx, functionQuery, n.Object, n.Privilege).Scan(&exists, &ok)
	default:
		return false, fmt.Errorf("check privilege: unknown kind %d", n.Kind)
	}
	if err != nil {
		return false, fmt.Errorf("check privileges: %w", err)
	}
	return ok || !exists, nil
}

// CheckStatements plans each statement with EXPLAIN (which runs nothing but
// checks every table, column and function privilege the statement needs,
// with NULL parameters) and returns the ones refused with SQLSTATE 42501.
// Statements EXPLAIN cannot take, or that fail otherwise, are not reported:
// the command checks their syntax itself.
func CheckStatements(ctx context.Context, conn *pgconn.PgConn, stmts []Statement) ([]StatementError, error) {
	var denied []StatementError
	for _, st := range stmts {
		_, err := conn.ExecParams(ctx, "EXPLAIN (COSTS OFF) "+st.SQL, make([][]byte, len(st.ParamOIDs)), st.ParamOIDs, nil, nil).Close()
		var pe *pgconn.PgError
		switch {
		case err == nil:
		case errors.As(err, &pe) && pe.Code == pgerrcode.InsufficientPrivilege:
			denied = append(denied, StatementError{Name: st.Name, Err: pe})
		case !errors.As(err, &pe):
			return nil, fmt.Errorf("check privileges of %s: %w", st.Name, err)
		}
	}
	return denied, nil
}

// Guard is a Set verified for one role; it explains the role's 42501
// errors met later.
type Guard struct {
	set  Set
	role string
}

// Explain is Set.Explain for the verified role; a nil Guard returns err.
func (g *Guard) Explain(err error) error {
	if g == nil {
		return err
	}
	return g.set.Explain(err, g.role)
}

// Verify connects to url, checks s and disconnects. A missing privilege is a
// *MissingError, a refused connection (bad password, no CONNECT) an error
// too. An unreachable server is only logged: the command waits for it or
// reports it the way it always does, and the Guard still explains 42501
// errors met later.
func (s Set) Verify(ctx context.Context, url string, log *slog.Logger) (*Guard, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := ipg.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	g := &Guard{set: s, role: cfg.User}
	cfg.RuntimeParams["application_name"] = "eventforge-privileges"
	if cfg.ConnectTimeout == 0 {
		// An address that swallows packets must not hold the command up
		// before it even serves /healthz.
		cfg.ConnectTimeout = connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			log.Warn("privilege check skipped: PostgreSQL unreachable", "err", err)
			return g, nil
		}
		return nil, g.Explain(fmt.Errorf("connect to PostgreSQL %s: %w", ipg.Redact(url), err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&g.role); err != nil {
		return nil, fmt.Errorf("check privileges: %w", err)
	}
	err = s.Check(ctx, conn, g.role)
	var me *MissingError
	if err != nil && !errors.As(err, &me) {
		return nil, err
	}
	if me, err = s.verifyReplication(ctx, conn, cfg, g.role, me, log); err != nil {
		return nil, err
	}
	denied, serr := CheckStatements(ctx, conn.PgConn(), s.Statements)
	if serr != nil {
		return nil, serr
	}
	if me == nil && len(denied) > 0 {
		me = &MissingError{Role: g.role, Command: s.Command}
	}
	if me != nil {
		me.Denied = denied
		return nil, me
	}
	log.Debug("privileges checked", "role", g.role, "command", s.Command)
	return g, nil
}

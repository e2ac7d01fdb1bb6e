package privileges

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// DocRef is where the roles are explained.
const DocRef = "see SECURITY.md#roles"

// ErrInsufficientPrivilege matches (errors.Is) every error of this package
// that reports a missing privilege.
var ErrInsufficientPrivilege = errors.New("insufficient privilege")

// MissingError lists what a role lacks, found by the start-up check.
type MissingError struct {
	Role    string
	Command string
	Missing []Need
	Denied  []StatementError // operator statements that failed their check
}

// StatementError is a statement whose planning was refused for privileges.
type StatementError struct {
	Name string
	Err  *pgconn.PgError
}

// Error is one line: every missing privilege, then where to read more.
func (e *MissingError) Error() string {
	parts := make([]string, 0, len(e.Missing)+len(e.Denied))
	for _, n := range e.Missing {
		parts = append(parts, describe(e.Role, e.Command, n))
	}
	for _, d := range e.Denied {
		parts = append(parts, fmt.Sprintf("role %q lacks a privilege %s needs for %s: %s", e.Role, e.Command, d.Name, d.Err.Message))
	}
	return strings.Join(parts, "; ") + "; " + DocRef
}

// Is makes errors.Is(err, ErrInsufficientPrivilege) true.
func (e *MissingError) Is(target error) bool { return target == ErrInsufficientPrivilege }

func describe(role, command string, n Need) string {
	what := "REPLICATION"
	switch n.Kind {
	case Table:
		what = n.Privilege + " on " + n.Object
	case Function:
		what = n.Privilege + " on function " + n.Object
	}
	return fmt.Sprintf("role %q lacks %s: %s needs it %s", role, what, command, n.Why)
}

// DeniedError is a 42501 met while a command ran.
type DeniedError struct {
	Role    string
	Command string
	Err     error // the command's error; it holds the *pgconn.PgError
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("role %q lacks a privilege %s needs: %v; %s", e.Role, e.Command, e.Err, DocRef)
}

func (e *DeniedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInsufficientPrivilege) true.
func (e *DeniedError) Is(target error) bool { return target == ErrInsufficientPrivilege }

// Explain returns err as a *DeniedError naming role when it holds a
// PostgreSQL insufficient_privilege error (SQLSTATE 42501), else err as it
// is (nil stays nil).
func (s Set) Explain(err error, role string) error {
	if !isDenied(err) || errors.Is(err, ErrInsufficientPrivilege) {
		return err
	}
	return &DeniedError{Role: role, Command: s.Command, Err: err}
}

func isDenied(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.InsufficientPrivilege
}

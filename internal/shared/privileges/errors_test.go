package privileges

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestMissingErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *MissingError
		want string
	}{
		{"replication", &MissingError{Role: "bob", Command: "the relay", Missing: Relay(false).Needs[:1]},
			`role "bob" lacks REPLICATION: the relay needs it to create and read the replication slot; see SECURITY.md#roles`},
		{"table", &MissingError{Role: "w", Command: "the worker", Missing: Worker(nil).Needs[:1]},
			`role "w" lacks INSERT on processed_events: the worker needs it to record each applied event (the inbox); see SECURITY.md#roles`},
		{"function and table", &MissingError{Role: "r", Command: "the relay", Missing: []Need{
			{Kind: Function, Object: "f(text)", Privilege: "EXECUTE", Why: "to f"},
			{Kind: Table, Object: "t", Privilege: "SELECT", Why: "to t"},
		}}, `role "r" lacks EXECUTE on function f(text): the relay needs it to f; role "r" lacks SELECT on t: the relay needs it to t; see SECURITY.md#roles`},
		{"statement", &MissingError{Role: "w", Command: "the worker", Denied: []StatementError{
			{Name: `handler "order.created"`, Err: &pgconn.PgError{Code: "42501", Message: "permission denied for table orders"}},
		}}, `role "w" lacks a privilege the worker needs for handler "order.created": permission denied for table orders; see SECURITY.md#roles`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if strings.Contains(tt.err.Error(), "\n") {
				t.Error("message is not one line")
			}
			if !errors.Is(tt.err, ErrInsufficientPrivilege) {
				t.Error("errors.Is(ErrInsufficientPrivilege) is false")
			}
		})
	}
}

func TestExplain(t *testing.T) {
	denied := fmt.Errorf("write relay_state: %w", &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "permission denied for table relay_state"})
	other := fmt.Errorf("write relay_state: %w", &pgconn.PgError{Code: "42P01", Message: "relation does not exist"})
	already := &MissingError{Role: "bob", Command: "the relay", Missing: Relay(false).Needs[:1]}
	plain := errors.New("connection refused")
	tests := []struct {
		name    string
		err     error
		want    string // "" keeps err as it is
		wrapped bool
	}{
		{"nil", nil, "", false},
		{"42501", denied, `role "bob" lacks a privilege the relay needs: write relay_state: ERROR: permission denied for table relay_state (SQLSTATE 42501); see SECURITY.md#roles`, true},
		{"other SQLSTATE", other, "", false},
		{"not a server error", plain, "", false},
		{"already explained", already, "", false},
		{"explained then wrapped", fmt.Errorf("session: %w", &DeniedError{Role: "bob", Command: "the relay", Err: denied}), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Relay(true).Explain(tt.err, "bob")
			if !tt.wrapped {
				if got != tt.err {
					t.Fatalf("got %v, want the error unchanged: %v", got, tt.err)
				}
				return
			}
			if got.Error() != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var pe *pgconn.PgError
			if !errors.As(got, &pe) || !errors.Is(got, ErrInsufficientPrivilege) {
				t.Error("the explained error lost its *pgconn.PgError or does not match ErrInsufficientPrivilege")
			}
		})
	}
	var g *Guard
	if g.Explain(denied) != denied {
		t.Error("a nil Guard changed the error")
	}
}

func TestSets(t *testing.T) {
	valid := map[string]bool{"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "EXECUTE": true}
	tests := []struct {
		set         Set
		replication bool
		function    bool
	}{
		{Relay(true), true, true},
		{Relay(false), true, false},
		{Worker(nil), false, false},
		{API(), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.set.Command, func(t *testing.T) {
			var repl, fn bool
			seen := map[string]bool{}
			for _, n := range tt.set.Needs {
				if n.Why == "" {
					t.Errorf("%+v: no reason", n)
				}
				key := fmt.Sprint(n.Kind, n.Object, n.Privilege)
				if seen[key] {
					t.Errorf("%+v listed twice", n)
				}
				seen[key] = true
				switch n.Kind {
				case Replication:
					repl = true
				case Function:
					fn = true
					fallthrough
				default:
					if !valid[n.Privilege] || n.Object == "" {
						t.Errorf("%+v: bad object or privilege", n)
					}
				}
			}
			if repl != tt.replication || fn != tt.function {
				t.Errorf("replication %v function %v, want %v %v", repl, fn, tt.replication, tt.function)
			}
		})
	}
}

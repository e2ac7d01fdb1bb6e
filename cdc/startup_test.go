package cdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestPermanentConnectError(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("connect to PostgreSQL: %w", &pgconn.PgError{Severity: "FATAL", Code: code})
	}
	refused := fmt.Errorf("connect: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	tests := []struct {
		name      string
		err       error
		permanent bool
	}{
		{"wrong password", pg(pgerrcode.InvalidPassword), true},
		{"no such role", pg(pgerrcode.InvalidAuthorizationSpecification), true},
		{"unknown database", pg(pgerrcode.InvalidCatalogName), true},
		{"no replication privilege", pg(pgerrcode.InsufficientPrivilege), true},
		{"connection refused", refused, false},
		{"server starting", pg(pgerrcode.CannotConnectNow), false},
		{"too many connections", pg(pgerrcode.TooManyConnections), false},
		{"admin shutdown", pg(pgerrcode.AdminShutdown), false},
		{"crash shutdown", pg(pgerrcode.CrashShutdown), false},
		{"connection failure", pg(pgerrcode.ConnectionFailure), false},
		{"timeout", fmt.Errorf("connect: %w", context.DeadlineExceeded), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := permanentConnectError(tt.err); got != tt.permanent {
				t.Fatalf("permanentConnectError(%v) = %v, want %v", tt.err, got, tt.permanent)
			}
			var fe *FatalError
			if got := errors.As(connectError(tt.err), &fe); got != tt.permanent {
				t.Fatalf("connectError(%v) fatal = %v, want %v", tt.err, got, tt.permanent)
			}
		})
	}
}

// wantFatalQuickly runs a relay on cfg and wants Run to stop on its own with
// a *FatalError within a few seconds.
func wantFatalQuickly(t *testing.T, cfg Config) error {
	t.Helper()
	began := time.Now()
	err := runUntilFatal(t, cfg)
	var fe *FatalError
	if !errors.As(err, &fe) {
		t.Fatalf("Run = %v, want a fatal error", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("Run took %s to give up", d)
	}
	return err
}

func withURL(t *testing.T, pgURL string, edit func(*url.URL)) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	edit(u)
	return u.String()
}

// TestConfigurationErrorsAreFatal: an unknown database or role cannot heal,
// so Run stops instead of retrying forever.
func TestConfigurationErrorsAreFatal(t *testing.T) {
	env := testenv.Shared(t)
	for name, pgURL := range map[string]string{
		"unknown database": withURL(t, env.PGURL, func(u *url.URL) { u.Path = "/" + testenv.UniqueName("nodb") }),
		"unknown role":     withURL(t, env.PGURL, func(u *url.URL) { u.User = url.User(testenv.UniqueName("norole")) }),
	} {
		t.Run(name, func(t *testing.T) {
			wantFatalQuickly(t, testConfig(t, pgURL, env.Brokers))
		})
	}
}

// TestWrongPasswordIsFatal runs against a private cluster that checks
// passwords.
func TestWrongPasswordIsFatal(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	env := testenv.Shared(t)
	certs := testenv.NewCerts(t, t.TempDir())
	pg := testenv.StartPostgresTLS(t, certs, "right-password")
	q := "sslmode=verify-full&sslrootcert=" + url.QueryEscape(certs.CAFile)
	right := pg.URLWith("eventforge", q, true)
	conn := connect(t, right) // the cluster accepts the right password
	conn.Close(context.Background())
	wrong := withURL(t, right, func(u *url.URL) { u.User = url.UserPassword(pg.User, "wrong-password") })
	err := wantFatalQuickly(t, testConfig(t, wrong, env.Brokers))
	if code, _ := pgErrorCode(err); code != pgerrcode.InvalidPassword {
		t.Fatalf("Run = %v, want SQLSTATE %s", err, pgerrcode.InvalidPassword)
	}
}

// TestWalLevelNotLogicalIsFatal runs against a private cluster restarted with
// wal_level = replica: the relay stops with one line saying what to change,
// instead of failing to create its slot forever.
func TestWalLevelNotLogicalIsFatal(t *testing.T) {
	t.Parallel() // mostly waits for a private server to start
	env := testenv.Shared(t)
	pg := testenv.StartPostgres(t)
	db := connect(t, pg.URL())
	mustExec(t, db, "ALTER SYSTEM SET wal_level = replica")
	db.Close(context.Background())
	pg.Restart(t, false)
	cfg := testConfig(t, pg.URL(), env.Brokers)
	err := wantFatalQuickly(t, cfg)
	if !errors.Is(err, ErrWalLevel) {
		t.Fatalf("Run = %v, want ErrWalLevel", err)
	}
	// The command exits non-zero with the reason on its last line.
	bin := testenv.Binary(t) // built before the deadline starts
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, relayArgs(cfg)...)
	cmd.Env = childproc.Env()
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || ctx.Err() != nil {
		t.Fatalf("cdc run = %v, want exit code 1; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "eventforge: wal_level is replica") {
		t.Fatalf("last line of stderr %q, want the wal_level reason", last)
	}
}

// TestConnectionRefusedIsRetried: a server that is not up yet may come up,
// so the relay retries, not ready, and says why.
func TestConnectionRefusedIsRetried(t *testing.T) {
	env := testenv.Shared(t)
	pgURL := withURL(t, env.PGURL, func(u *url.URL) { u.Host = testenv.FreeAddr(t) })
	r := startRelay(t, testConfig(t, pgURL, env.Brokers))
	waitFor(t, 10*time.Second, "a failed session", func() bool { return metricValue(t, r, "eventforge_cdc_session_errors_total") >= 2 })
	select {
	case <-r.done:
		t.Fatalf("Run returned %v on a refused connection, want retries", r.err)
	default:
	}
	if err := r.ready(context.Background()); err == nil || !strings.Contains(err.Error(), "reconnecting") {
		t.Fatalf("readiness %v, want reconnecting with the reason", err)
	}
}

// TestBackfillWithoutSelectIsFatal: a relay asked to backfill whose role
// cannot read the outbox table stops at start-up with one line naming the
// role, the table and the grant, before it creates the slot.
func TestBackfillWithoutSelectIsFatal(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	pgURL := env.NewDatabase(t)
	admin := connect(t, pgURL)
	role := testenv.UniqueName("relaynosel")
	mustExec(t, admin, "CREATE ROLE "+role+" LOGIN REPLICATION")
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+role)
		if _, err := admin.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Logf("drop role %s: %v", role, err)
		}
	})
	mustExec(t, admin, "GRANT SELECT, INSERT, UPDATE ON relay_state TO "+role)
	mustExec(t, admin, "GRANT SELECT, INSERT ON outbox_rejected TO "+role)
	cfg := testConfig(t, withURL(t, pgURL, func(u *url.URL) { u.User = url.User(role) }), env.Brokers)
	cfg.BackfillAll = true
	err := wantFatalQuickly(t, cfg)
	if !errors.Is(err, ErrBackfillPrivilege) || !strings.Contains(err.Error(), `role "`+role+`" lacks SELECT on public.outbox`) {
		t.Fatalf("Run = %v, want ErrBackfillPrivilege naming the role and the table", err)
	}
	if s, err := readSlot(context.Background(), admin, cfg.Slot); err != nil || s.exists {
		t.Errorf("slot %s exists (%v) after the refused start", cfg.Slot, err)
	}
}

package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(t.Context()) })
	return conn
}

func TestNewDatabaseIsMigratedAndDroppedAtCleanup(t *testing.T) {
	env := Shared(t)
	var url string
	t.Run("use", func(t *testing.T) {
		url = env.NewDatabase(t)
		var n int
		if err := connect(t, url).QueryRow(t.Context(),
			"SELECT count(*) FROM pg_publication WHERE pubname = 'eventforge_outbox'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("publication count = %d, err = %v", n, err)
		}
	})
	cfg, _ := pgx.ParseConfig(url)
	var exists bool
	if err := connect(t, env.PGURL).QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", cfg.Database).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", cfg.Database)
	}
}

func TestPrivatePostgresSurvivesImmediateRestart(t *testing.T) {
	t.Parallel()
	pg := StartPostgres(t)
	conn := connect(t, pg.URL())
	if _, err := conn.Exec(t.Context(), "INSERT INTO orders (id, status) VALUES ('o1', 'created')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	pg.Restart(t, true)
	var status string
	if err := connect(t, pg.URL()).QueryRow(t.Context(), "SELECT status FROM orders WHERE id = 'o1'").Scan(&status); err != nil {
		t.Fatalf("committed row after immediate restart: %v", err)
	}
}

// TestPrivatePostgresVersionsSideBySide starts private clusters of two
// major versions from parallel tests: each gets its own version, and the
// process's EVENTFORGE_PG_VERSION is left as it was.
func TestPrivatePostgresVersionsSideBySide(t *testing.T) {
	t.Parallel()
	before := Version()
	for _, version := range []string{"16", "17"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			pg := StartPostgresVersion(t, version)
			var num string
			if err := connect(t, pg.URL()).QueryRow(t.Context(), "SHOW server_version_num").Scan(&num); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(num, version) {
				t.Errorf("server_version_num = %s, want PostgreSQL %s", num, version)
			}
			if Version() != before {
				t.Errorf("EVENTFORGE_PG_VERSION = %q while the cluster runs, want %q", Version(), before)
			}
		})
	}
}

func TestPrebuiltBinary(t *testing.T) {
	dir := t.TempDir()
	exe, plain := filepath.Join(dir, "eventforge"), filepath.Join(dir, "notes")
	for path, mode := range map[string]os.FileMode{exe: 0o755, plain: 0o644} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := prebuilt(exe); err != nil || got != exe {
		t.Errorf("prebuilt(%s) = %q, %v; want the path", exe, got, err)
	}
	for _, bad := range []string{plain, dir, filepath.Join(dir, "missing")} {
		if _, err := prebuilt(bad); err == nil || !strings.Contains(err.Error(), BinaryEnv) {
			t.Errorf("prebuilt(%s) = %v, want an error naming %s", bad, err, BinaryEnv)
		}
	}
}

func TestPollInterval(t *testing.T) {
	for _, c := range []struct{ took, want time.Duration }{
		{0, minPoll},
		{10 * time.Millisecond, minPoll},
		{100 * time.Millisecond, 200 * time.Millisecond},
		{400 * time.Millisecond, 800 * time.Millisecond},
		{3 * time.Second, maxPoll},
	} {
		if got := pollInterval(c.took); got != c.want {
			t.Errorf("pollInterval(%s) = %s, want %s", c.took, got, c.want)
		}
	}
}

// TestWaitForSparesAnExpensiveCondition: a condition that takes 100 ms a
// check is not checked back to back: over a second, at most 5 checks (one
// every 300 ms), where a fixed 50 ms sleep made 7.
func TestWaitForSparesAnExpensiveCondition(t *testing.T) {
	checks := 0
	began := time.Now()
	WaitFor(t, 10*time.Second, "a second", func() bool {
		checks++
		time.Sleep(100 * time.Millisecond)
		return time.Since(began) >= time.Second
	})
	if checks > 5 {
		t.Errorf("%d checks of a 100 ms condition in a second, want at most 5", checks)
	}
}

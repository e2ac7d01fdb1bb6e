// Package testenv gives integration tests the real services they run
// against: the shared local PostgreSQL cluster and Kafka broker that `make up`
// starts (started here when they are not running), a fresh migrated database
// per test, unique names for topics, slots and groups, the eventforge binary
// for subprocess tests, and private instances for tests that restart a
// service. A service that cannot start fails the test with the reason; it is
// never a skip.
//
// Imports (test support, for _test files and tools only): shared libraries
// (internal/shared/kafka, internal/shared/migrate).
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/migrate"
)

// Env is the shared local services.
type Env struct {
	PGURL   string   // superuser URL of the cluster's "eventforge" database
	Brokers []string // host:port of the broker
}

var shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Shared returns the shared local services, running deploy/local/up.sh once
// per test process (it reuses what runs and waits until both answer).
func Shared(t testing.TB) *Env {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("integration test: needs PostgreSQL and Kafka (run without -short)")
	}
	shared.once.Do(func() { shared.env, shared.err = startShared() })
	if shared.err != nil {
		t.Fatalf("local services: %v", shared.err)
	}
	return shared.env
}

func startShared() (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if out, err := runScript(root, "up.sh"); err != nil {
		return nil, fmt.Errorf("deploy/local/up.sh: %w\n%s", err, out)
	}
	vars, err := readEnvFile(filepath.Join(stateDir(root), "local.env"))
	if err != nil {
		return nil, err
	}
	env := &Env{PGURL: vars["EVENTFORGE_PG_URL"], Brokers: kafka.ParseBrokers(vars["EVENTFORGE_KAFKA_BROKERS"])}
	if env.PGURL == "" || len(env.Brokers) == 0 {
		return nil, fmt.Errorf("local.env lacks EVENTFORGE_PG_URL or EVENTFORGE_KAFKA_BROKERS")
	}
	return env, nil
}

// NewDatabase creates a fresh database on the shared cluster, applies the
// migrations with the demo's tables (orders) and returns its URL. At cleanup
// its replication slots and the database itself are dropped.
func (e *Env) NewDatabase(t testing.TB) string {
	t.Helper()
	url := newEmptyDatabase(t, e.PGURL)
	migrateOrFail(t, url)
	return url
}

// NewEmptyDatabase is NewDatabase without the migrations: a database with
// nothing in it.
func (e *Env) NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newEmptyDatabase(t, e.PGURL)
}

func newDatabase(t testing.TB, adminURL string) string {
	t.Helper()
	url := newEmptyDatabase(t, adminURL)
	migrateOrFail(t, url)
	return url
}

func migrateOrFail(t testing.TB, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Migrate(ctx, url); err != nil {
		t.Fatalf("migrate %s: %v", url, err)
	}
}

func newEmptyDatabase(t testing.TB, adminURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := UniqueName("t")
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	url := withDatabase(t, adminURL, name)
	t.Cleanup(func() { dropDatabase(t, adminURL, name) })
	return url
}

// Migrate applies EventForge's migrations to the database at url, the demo's
// tables included (the API, the demo handler and many tests use orders).
func Migrate(ctx context.Context, url string) error {
	_, err := migrate.URL(ctx, url, migrate.Options{Demo: true})
	return err
}

func dropDatabase(t testing.TB, adminURL, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Logf("drop database %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
	if err := dropDatabaseWithSlots(ctx, admin, name); err != nil {
		t.Logf("%v", err)
	}
}

func withDatabase(t testing.TB, url, db string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse PostgreSQL URL: %v", err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, db)
}

// UniqueName returns a short unique lowercase identifier starting with
// prefix, valid as a database, slot, topic, group or consumer name.
func UniqueName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(prefix) + "_" + hex.EncodeToString(b[:])
}

var binary struct {
	once sync.Once
	path string
	err  error
}

// BinaryEnv names a prebuilt eventforge binary for Binary to return instead
// of building one: make test builds bin/eventforge once for every package's
// test process.
const BinaryEnv = "EVENTFORGE_TEST_BINARY"

// Binary builds ./cmd/eventforge once per test process and returns its path
// (or returns the binary BinaryEnv names).
func Binary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			binary.path, binary.err = prebuilt(p)
			return
		}
		root, err := RepoRoot()
		if err != nil {
			binary.err = err
			return
		}
		dir := filepath.Join(stateDir(root), "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			binary.err = err
			return
		}
		// Each test process builds its own and none outlives its timeout:
		// what is older than an hour belongs to finished processes.
		if old, err := leftoverBinaries(dir, time.Now().Add(-time.Hour)); err == nil {
			for _, p := range old {
				_ = os.Remove(p)
			}
		}
		binary.path = filepath.Join(dir, fmt.Sprintf("eventforge-test-%d", os.Getpid()))
		cmd := exec.Command("go", "build", "-o", binary.path, "./cmd/eventforge")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build ./cmd/eventforge: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// prebuilt checks that path is an executable file.
func prebuilt(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", BinaryEnv, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s: %s is not an executable file", BinaryEnv, path)
	}
	return path, nil
}

// RepoRoot is the folder holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func stateDir(root string) string {
	if d := os.Getenv("EVENTFORGE_STATE_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, ".eventforge")
}

func runScript(root, name string, args ...string) ([]byte, error) {
	return runScriptEnv(root, nil, name, args...)
}

// runScriptEnv is runScript with env added to the process's environment.
func runScriptEnv(root string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(root, "deploy", "local", name), args...)
	cmd.Dir = root
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			vars[k] = v
		}
	}
	return vars, sc.Err()
}

// WaitFor polls cond until it holds, failing the test with what it waited
// for when timeout passes first. Between checks it sleeps pollInterval of
// what the last check took.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		began := time.Now()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pollInterval(time.Since(began)))
	}
}

// Bounds of WaitFor's sleep between two checks of its condition.
const (
	minPoll = 50 * time.Millisecond
	maxPoll = time.Second
)

// pollInterval is the sleep after a check that took took: twice as long,
// within minPoll..maxPoll. A cheap condition (a field, one query) is checked
// every 50 ms; an expensive one (a whole topic read back, a new client per
// check) then takes at most a third of a core instead of all of it, which
// on a loaded 2-core machine is CPU the relay under test needs.
func pollInterval(took time.Duration) time.Duration {
	return min(max(2*took, minPoll), maxPoll)
}

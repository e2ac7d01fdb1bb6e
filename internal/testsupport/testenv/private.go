package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// Postgres is a private PostgreSQL cluster of one test, for tests that
// restart or crash the server.
type Postgres struct {
	root, dir string
	url       string
	env       []string // added to pg.sh's environment: the major version
}

// StartPostgres starts a private cluster with a migrated database
// "eventforge"; it is stopped and removed at cleanup.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	return startPostgres(t, nil)
}

func startPostgres(t testing.TB, env []string) *Postgres {
	t.Helper()
	Shared(t) // the same machine prerequisites; also skips under -short
	root, dir := privateDir(t, "pg")
	p := &Postgres{root: root, dir: dir, env: env}
	t.Cleanup(func() {
		_, _ = runScriptEnv(root, env, "pg.sh", "kill", dir)
		removeAll(dir)
	})
	p.Start(t)
	out, err := runScriptEnv(root, env, "pg.sh", "url", dir)
	if err != nil {
		t.Fatalf("pg.sh url: %v\n%s", err, out)
	}
	p.url = strings.TrimSpace(string(out))
	if err := Migrate(t.Context(), p.url); err != nil {
		t.Fatalf("migrate private cluster: %v", err)
	}
	return p
}

// URL is the superuser URL of the cluster's "eventforge" database.
func (p *Postgres) URL() string { return p.url }

// NewDatabase creates another migrated database on the private cluster.
func (p *Postgres) NewDatabase(t testing.TB) string { return newDatabase(t, p.url) }

// Start starts the cluster (same port as before) and waits until it answers.
func (p *Postgres) Start(t testing.TB) { p.run(t, "start") }

// Stop shuts the cluster down cleanly.
func (p *Postgres) Stop(t testing.TB) { p.run(t, "stop") }

// Restart stops the cluster, immediately (as after a crash: WAL recovery on
// start, slots back to their last checkpointed position) or cleanly, and
// starts it again.
func (p *Postgres) Restart(t testing.TB, immediate bool) {
	mode := "fast"
	if immediate {
		mode = "immediate"
	}
	p.run(t, "restart", mode)
}

func (p *Postgres) run(t testing.TB, cmd string, extra ...string) {
	t.Helper()
	out, err := runScriptEnv(p.root, p.env, "pg.sh", append([]string{cmd, p.dir}, extra...)...)
	if err != nil {
		t.Fatalf("pg.sh %s: %v\n%s", cmd, err, out)
	}
}

// Kafka is a private broker of one test, for tests that stop or restart it.
type Kafka struct {
	root, dir string
	brokers   []string
}

// StartKafka starts a private single-node broker; it is killed and removed at
// cleanup.
func StartKafka(t testing.TB) *Kafka {
	t.Helper()
	Shared(t)
	root, dir := privateDir(t, "kafka")
	k := &Kafka{root: root, dir: dir}
	t.Cleanup(func() {
		_, _ = runScript(root, "kafka.sh", "kill", dir)
		removeAll(dir)
	})
	k.Start(t)
	out, err := runScript(root, "kafka.sh", "brokers", dir)
	if err != nil {
		t.Fatalf("kafka.sh brokers: %v\n%s", err, out)
	}
	k.brokers = kafka.ParseBrokers(strings.TrimSpace(string(out)))
	return k
}

// Brokers is the broker's host:port; it stays the same across restarts.
func (k *Kafka) Brokers() []string { return k.brokers }

// Start starts the broker and waits until it answers.
func (k *Kafka) Start(t testing.TB) { k.run(t, "start") }

// Stop shuts the broker down in order.
func (k *Kafka) Stop(t testing.TB) { k.run(t, "stop") }

// Kill ends the broker with SIGKILL.
func (k *Kafka) Kill(t testing.TB) { k.run(t, "kill") }

func (k *Kafka) run(t testing.TB, cmd string) {
	t.Helper()
	out, err := runScriptEnv(k.root, privateKafkaEnv, "kafka.sh", cmd, k.dir)
	if err != nil {
		t.Fatalf("kafka.sh %s: %v\n%s", cmd, err, out)
	}
}

// privateKafkaEnv is the environment of kafka.sh for a test's throwaway
// broker: the quick JIT only, as a broker that lives for one test spends
// more CPU compiling than it would save.
var privateKafkaEnv = []string{"KAFKA_JVM_EXTRA_OPTS=-XX:TieredStopAtLevel=1"}

// privateDir makes .eventforge/private/<kind>-<unique>: inside the repository
// so the cluster's OS user can reach it, and where make down finds leftovers.
func privateDir(t testing.TB, kind string) (root, dir string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(stateDir(root), "private", UniqueName(kind))
	dir = strings.Replace(dir, kind+"_", kind+"-", 1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

func removeAll(dir string) {
	if target, err := filepath.EvalSymlinks(filepath.Join(dir, "data")); err == nil {
		_ = os.RemoveAll(target)
	}
	_ = os.RemoveAll(dir)
}

package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/childproc"
)

// Advisory lock keys of the demo's two gates. The console holds a gate with
// a session lock; the demo database's triggers take the shared lock, so the
// API's COMMIT (gateCommit) or the worker's business change (gateEffect)
// waits while the console holds it. Nothing else is changed: the processes
// are the real ones, only paused where the page needs to show a state.
const (
	gateCommit int64 = 7301
	gateEffect int64 = 7302
)

// demoPartitions is the partition count of the demo topic: two workers, each
// owning some.
const demoPartitions = 4

// demoSchema is what the console adds to its own fresh database, beside
// eventforge migrate: the gates, and a table counting every business change
// (each UPDATE of an order) so the effect card shows how often it happened.
const demoSchema = `
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
CREATE TABLE console_effects (n bigserial PRIMARY KEY, order_id text NOT NULL, status text NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE FUNCTION console_gate_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock_shared(7301); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER console_gate_commit AFTER INSERT ON outbox
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION console_gate_commit();
CREATE FUNCTION console_effect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(7302);
  INSERT INTO console_effects (order_id, status) VALUES (NEW.id, NEW.status);
  RETURN NEW;
END $$;
CREATE TRIGGER console_effect BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION console_effect();
`

// handlersYAML is the contract's demo handler: order.created marks the order
// processed; a missing order fails (retried, then dead-lettered).
const handlersYAML = `unknown: skip
handlers:
  order.created:
    sql: UPDATE orders SET status = 'processed', updated_at = now() WHERE id = $1
    expect_rows: 1
`

// demo is the console's own pipeline: a fresh database, slot, topic prefix
// and group, with an API, a relay and two workers of the same binary.
type demo struct {
	cfg                             Config
	id, dbName, dbURL, slot, prefix string
	group, dir, handlers            string
	api, relay, twin                *proc
	workers                         []*proc
	apiAddr, relayAddr              string

	gateMu sync.Mutex
	gate   *pgx.Conn
	held   map[int64]bool
}

func (d *demo) topic() string { return d.prefix + "orders" }

// startDemo creates the demo's database and topics and starts its processes.
func startDemo(ctx context.Context, cfg Config) (*demo, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b)
	d := &demo{
		cfg: cfg, id: id, dbName: "console_" + id, slot: "console_" + id, prefix: "console-" + id + ".",
		group: "console-" + id, held: map[int64]bool{},
	}
	d.dir = filepath.Join(cfg.StateDir, "console", "run-"+id)
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create demo directory: %w", err)
	}
	if err := d.setup(ctx); err != nil {
		d.close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := d.ensureHealthy(ctx); err != nil {
		d.close(context.WithoutCancel(ctx))
		return nil, err
	}
	return d, nil
}

func (d *demo) setup(ctx context.Context) error {
	var err error
	if d.dbURL, err = createDatabase(ctx, d.cfg.PGURL, d.dbName); err != nil {
		return err
	}
	migrate := exec.CommandContext(ctx, d.cfg.Bin, "migrate", "--demo")
	migrate.Env = childEnv("", pgURLEnv(d.dbURL))
	out, err := migrate.CombinedOutput()
	if err != nil {
		return fmt.Errorf("migrate demo database: %w: %s", err, out)
	}
	conn, err := pgx.Connect(ctx, d.dbURL)
	if err != nil {
		return fmt.Errorf("connect to demo database: %w", err)
	}
	if _, err := conn.Exec(ctx, demoSchema); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("install demo gates: %w", err)
	}
	d.gate = conn
	if err := createTopics(d.cfg.Kafka.Brokers, d.topic(), d.topic()+outbox.DLQSuffix); err != nil {
		return err
	}
	d.handlers = filepath.Join(d.dir, "handlers.yaml")
	if err := os.WriteFile(d.handlers, []byte(handlersYAML), 0o644); err != nil {
		return fmt.Errorf("write handlers file: %w", err)
	}
	return d.makeProcs()
}

func (d *demo) makeProcs() error {
	addrs := make([]string, 5)
	for i := range addrs {
		a, err := childproc.FreeAddr()
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	d.apiAddr, d.relayAddr = addrs[0], addrs[1]
	kb := []string{"--kafka-brokers", d.cfg.brokerList()}
	// The PostgreSQL URL, password included, travels in the environment,
	// never in the arguments. Each process names its PostgreSQL sessions, so
	// pg_stat_activity tells whose transaction waits at a gate.
	mk := func(name, ready, pgURL string, args ...string) *proc {
		return &proc{name: name, bin: d.cfg.Bin, args: args, logDir: d.dir, readyAddr: ready, env: []string{pgURLEnv(pgURL)}}
	}
	d.api = mk("api", d.apiAddr, withAppName(d.dbURL, "api"), "api", "run", "--http-addr", d.apiAddr,
		"--request-timeout", "2m", "--write-timeout", "150s", "--log-level", "warn")
	d.relay = mk("relay", d.relayAddr, d.dbURL, append([]string{"cdc", "run", "--slot", d.slot,
		"--topic-prefix", d.prefix, "--topic-partitions", fmt.Sprint(demoPartitions),
		"--metrics-addr", d.relayAddr, "--heartbeat-interval", "1s", "--status-interval", "1s",
		"--shutdown-timeout", "5s", "--log-level", "warn"}, kb...)...)
	worker := func(name, addr, group string) *proc {
		return mk(name, addr, withAppName(d.dbURL, name), append([]string{"worker", "run", "--group", group, "--consumer", d.group,
			"--topics", d.topic(), "--handlers", d.handlers, "--metrics-addr", addr,
			"--max-attempts", "3", "--retry-backoff", "100ms", "--max-backoff", "400ms",
			"--batch-size", "1", "--commit-interval", "2s", "--session-timeout", "6s", "--log-level", "warn"}, kb...)...)
	}
	d.workers = []*proc{worker("worker-1", addrs[2], d.group), worker("worker-2", addrs[3], d.group)}
	d.twin = worker("worker-twin", addrs[4], d.group+"-twin")
	return nil
}

// procs lists every process of the demo, the twin included.
func (d *demo) procs() []*proc { return append([]*proc{d.api, d.relay, d.twin}, d.workers...) }

// workerAddrs are the metrics addresses of the group's workers.
func (d *demo) workerAddrs() []string {
	var out []string
	for _, w := range append([]*proc{d.twin}, d.workers...) {
		out = append(out, w.readyAddr)
	}
	return out
}

// ensureHealthy leaves the demo as a scenario expects to find it: the gates
// open, the twin stopped, and the API, the relay and both workers running
// without failpoints and ready.
func (d *demo) ensureHealthy(ctx context.Context) error {
	d.releaseAll(ctx)
	d.twin.stop(10 * time.Second)
	var errs []error
	for _, p := range append([]*proc{d.api, d.relay}, d.workers...) {
		if p.running() && p.status().Failpoint != "" {
			p.stop(10 * time.Second)
		}
		if !p.running() {
			if err := p.start(""); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range append([]*proc{d.api, d.relay}, d.workers...) {
		if err := p.waitReady(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hold closes a gate: the console takes the exclusive advisory lock.
func (d *demo) hold(ctx context.Context, key int64) error {
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	if d.held[key] {
		return nil
	}
	if _, err := d.gate.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("hold gate: %w", err)
	}
	d.held[key] = true
	return nil
}

// release opens a gate.
func (d *demo) release(ctx context.Context, key int64) error {
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	if !d.held[key] {
		return nil
	}
	if _, err := d.gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		return fmt.Errorf("release gate: %w", err)
	}
	delete(d.held, key)
	return nil
}

// releaseAll opens every gate. A transaction still waiting to commit
// belongs to an abandoned run: it is rolled back (its API request fails)
// rather than committed by the release.
func (d *demo) releaseAll(ctx context.Context) {
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	if d.gate == nil {
		return
	}
	_, _ = d.gate.Exec(ctx, `SELECT pg_cancel_backend(l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0 AND l.objid = $1 AND a.datname = current_database()`, gateCommit)
	for range 50 { // until the cancelled transactions stopped waiting
		var n int
		if err := d.gate.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = 0 AND objid = $1
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, gateCommit).Scan(&n); err != nil || n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := d.gate.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err == nil {
		d.held = map[int64]bool{}
	}
}

// close stops every process and removes the database, the slot and the
// topics, so a demo leaves nothing behind in the shared services.
func (d *demo) close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range d.procs() {
		if p != nil {
			wg.Go(func() { p.stop(10 * time.Second) })
		}
	}
	wg.Wait()
	d.gateMu.Lock()
	if d.gate != nil {
		d.gate.Close(ctx)
		d.gate = nil
	}
	d.gateMu.Unlock()
	if d.dbURL != "" {
		dropDatabase(ctx, d.cfg.PGURL, d.dbName, d.slot)
	}
	deleteTopics(d.cfg.Kafka.Brokers, d.topic(), d.topic()+outbox.DLQSuffix)
}

// pgURLEnv is the environment entry that gives a child process its
// PostgreSQL URL: the EVENTFORGE_ twin of --pg-url.
func pgURLEnv(pgURL string) string { return "EVENTFORGE_PG_URL=" + pgURL }

// withAppName sets application_name in a PostgreSQL URL.
func withAppName(pgURL, name string) string {
	u, err := url.Parse(pgURL)
	if err != nil {
		return pgURL
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func createDatabase(ctx context.Context, baseURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func dropDatabase(ctx context.Context, baseURL, name, slot string) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	// A slot outliving the demo would keep WAL forever: wait for its
	// walsender to go, then drop it.
	for ctx.Err() == nil {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slot).Scan(&n); err != nil || n == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func createTopics(brokers []string, topics ...string) error {
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers, ClientID: "eventforge-console"}.Base())
	if err != nil {
		return fmt.Errorf("connect Kafka admin: %w", err)
	}
	defer admin.Close()
	for _, t := range topics {
		err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: demoPartitions, ReplicationFactor: 1}, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

func deleteTopics(brokers []string, topics ...string) {
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers, ClientID: "eventforge-console"}.Base())
	if err != nil {
		return
	}
	defer admin.Close()
	for _, t := range topics {
		_ = admin.DeleteTopic(t)
	}
}

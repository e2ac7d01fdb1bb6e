package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/childproc"
)

// Report is the JSON report of a run.
type Report struct {
	Seed           uint64  `json:"seed"`
	DurationSec    float64 `json:"duration_seconds"`
	Events         int     `json:"events"` // committed events
	Kills          int     `json:"kills"`  // SIGKILLs of relays and workers
	RelayKills     int     `json:"relay_kills"`
	WorkerKills    int     `json:"worker_kills"`
	BrokerRestarts int     `json:"broker_restarts"`
	BrokerFreezes  int     `json:"broker_freezes"` // SIGSTOP of a broker for 10-20 s
	PGRestarts     int     `json:"pg_restarts"`
	Promotions     int     `json:"promotions"` // primary stopped hard, standby promoted
	// PromotionsSkipped: promotions not made because the standby held no
	// synced copy of the slot yet (a PostgreSQL restart instead).
	PromotionsSkipped int `json:"promotions_skipped"`
	Unexpected        int `json:"unexpected_exits"` // members that exited without being killed
	Load              struct {
		Single, Multi, Rollbacks, Unknown, API, Errors int
	} `json:"load"`
	QuiesceSec float64 `json:"quiesce_seconds"`
	Result     Result  `json:"result"`
}

// Line is the one-line summary.
func (r *Report) Line() string {
	x := r.Result
	return fmt.Sprintf("chaos: duration=%s events=%d kills=%d broker_restarts=%d broker_freezes=%d pg_restarts=%d promotions=%d lost=%d phantom=%d order_violations=%d double_applied=%d unapplied=%d duplicates=%d",
		time.Duration(r.DurationSec*float64(time.Second)).Round(time.Second), r.Events, r.Kills, r.BrokerRestarts, r.BrokerFreezes, r.PGRestarts, r.Promotions,
		x.Lost, x.Phantom, x.OrderViolations, x.DoubleApplied, x.Unapplied, x.Duplicates) + mode(x.ExactlyOnce)
}

func mode(exactlyOnce bool) string {
	if exactlyOnce {
		return " mode=exactly-once"
	}
	return ""
}

// ErrViolations is returned when a guarantee was broken.
var ErrViolations = errors.New("guarantees violated")

const handlersYAML = `unknown: dlq
handlers:
  order.created:
    sql: INSERT INTO chaos_effects (event_id, aggregate_id, applied) VALUES ($3, $1, 1) ON CONFLICT (event_id) DO UPDATE SET applied = chaos_effects.applied + 1
  chaos.event:
    sql: INSERT INTO chaos_effects (event_id, aggregate_id, applied) VALUES ($3, $1, 1) ON CONFLICT (event_id) DO UPDATE SET applied = chaos_effects.applied + 1
`

// Run performs one chaos run and writes its report. It returns
// ErrViolations (with the report written) when a guarantee broke.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	r, err := setUp(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer r.tearDown()
	stopMembers := r.startMembers(ctx)
	defer stopMembers()
	rep := &Report{Seed: cfg.Seed}
	led, err := r.loadUnderFaults(ctx, rep)
	if err != nil {
		return nil, err
	}
	db, err := connectRetry(ctx, r.dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close(context.Background())
	if err := r.quiesce(ctx, db, led, rep); err != nil {
		return nil, err
	}
	if err := r.check(ctx, db, led, rep); err != nil {
		return nil, err
	}
	if err := writeReport(cfg.Report, rep); err != nil {
		return rep, err
	}
	if rep.Result.Violations() > 0 {
		return rep, ErrViolations
	}
	return rep, nil
}

// run is one chaos run's services, database, slot, topic and members.
type run struct {
	cfg                 Config
	log                 *slog.Logger
	rng                 *rand.Rand // of the fault schedule
	svc                 *services
	dbURL, logDir       string
	prefix, topic, slot string
	group, handlers     string
	apiAddr             string
	api                 *member
	relays, workers     []*member
	cancels             []context.CancelFunc
}

// setUp starts the private services and prepares the run's database, slot
// and topics.
func setUp(ctx context.Context, cfg Config) (*run, error) {
	runID := fmt.Sprintf("%d", time.Now().Unix())
	r := &run{cfg: cfg, log: cfg.Log, logDir: filepath.Join(cfg.StateDir, "run-"+runID), rng: rand.New(rand.NewPCG(cfg.Seed, 1)),
		prefix: "chaos" + runID + ".", slot: "chaos_" + runID, group: "chaos-" + runID}
	r.topic = r.prefix + "orders"
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return nil, err
	}
	r.log.Info("starting private services", "dir", cfg.StateDir, "seed", cfg.Seed, "logs", r.logDir,
		"pg_version", cfg.PGVersion, "standby", cfg.Promotions, "kafka_nodes", cfg.KafkaNodes)
	svc, err := startServices(ctx, cfg.Root, cfg.StateDir, cfg.PGVersion, cfg.Promotions, cfg.KafkaNodes)
	if err != nil {
		return nil, err
	}
	r.svc = svc
	if err := r.prepare(ctx, "chaos_"+runID); err != nil {
		r.tearDown()
		return nil, err
	}
	return r, nil
}

// prepare creates the run's database (reached on whichever server is the
// primary), slot and topics, the handlers file and the API's address.
func (r *run) prepare(ctx context.Context, dbName string) error {
	if r.svc.standby != "" {
		if err := r.svc.makeSynchronous(ctx); err != nil {
			return err
		}
	}
	if err := freshDatabase(ctx, r.svc.pgURL, dbName); err != nil {
		return err
	}
	u, err := r.svc.multiHostURL(ctx, dbName)
	if err != nil {
		return err
	}
	r.dbURL = u
	if err := prepare(ctx, r.cfg.Bin, r.dbURL, r.svc.brokers, r.topic, r.slot); err != nil {
		return err
	}
	r.handlers = filepath.Join(r.logDir, "handlers.yaml")
	if err := os.WriteFile(r.handlers, []byte(handlersYAML), 0o644); err != nil {
		return err
	}
	r.apiAddr, err = childproc.FreeAddr()
	return err
}

func (r *run) tearDown() {
	if err := r.svc.down(); err != nil {
		r.log.Warn("stopping private services", "err", err)
	}
}

// startMembers starts the API, two relays on one slot and three workers,
// each restarted whenever it exits; the function returned stops them all.
func (r *run) startMembers(ctx context.Context) (stop func()) {
	brokers := strings.Join(r.svc.brokers, ",")
	relayArgs := []string{"cdc", "run", "--pg-url", r.dbURL, "--kafka-brokers", brokers, "--slot", r.slot, "--topic-prefix", r.prefix,
		"--topic-partitions", "6", "--heartbeat-interval", "2s", "--status-interval", "1s", "--shutdown-timeout", "10s"}
	if r.cfg.ExactlyOnce {
		relayArgs = append(relayArgs, "--exactly-once")
	}
	workerArgs := []string{"worker", "run", "--pg-url", r.dbURL, "--kafka-brokers", brokers, "--group", r.group,
		"--consumer", "chaos", "--topics", r.topic, "--handlers", r.handlers, "--session-timeout", "6s",
		"--max-attempts", "50", "--max-retry-time", "10m", "--retry-backoff", "100ms", "--max-backoff", "2s"}
	mk := func(name string, args []string) *member {
		return &member{name: name, bin: r.cfg.Bin, args: args, dir: r.logDir, log: r.log, done: make(chan struct{})}
	}
	r.relays = []*member{mk("relay-a", relayArgs), mk("relay-b", relayArgs)}
	r.workers = []*member{mk("worker-1", workerArgs), mk("worker-2", workerArgs), mk("worker-3", workerArgs)}
	r.api = mk("api", []string{"api", "run", "--pg-url", r.dbURL, "--http-addr", r.apiAddr})
	all := r.members()
	r.cancels = make([]context.CancelFunc, len(all))
	for i, m := range all {
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r.cancels[i] = cancel
		go m.run(mctx)
	}
	return func() {
		var wg sync.WaitGroup
		for i, m := range all {
			wg.Add(1)
			go func() { defer wg.Done(); m.stop(r.cancels[i]) }()
		}
		wg.Wait()
	}
}

func (r *run) members() []*member {
	return append(append([]*member{r.api}, r.relays...), r.workers...)
}

// loadUnderFaults runs the labelled load (cfg.Writers SQL writers and one
// API writer) while faults are injected for cfg.Duration, and returns the
// ledger of every write.
func (r *run) loadUnderFaults(ctx context.Context, rep *Report) (*ledger, error) {
	led := &ledger{}
	stats := &loadStats{}
	lctx, stopLoad := context.WithCancel(ctx)
	var lg sync.WaitGroup
	for i := range r.cfg.Writers {
		w := &sqlWriter{id: i, url: r.dbURL, rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(i+2))), led: led, stats: stats}
		lg.Add(1)
		go func() { defer lg.Done(); w.run(lctx) }()
	}
	aw := &apiWriter{base: "http://" + r.apiAddr, led: led, stats: stats}
	lg.Add(1)
	go func() { defer lg.Done(); aw.run(lctx) }()

	began := time.Now()
	fctx, stopFaults := context.WithTimeout(ctx, r.cfg.Duration)
	(&faulter{run: r, rep: rep}).inject(fctx)
	stopFaults()
	stopLoad()
	lg.Wait()
	rep.DurationSec = time.Since(began).Seconds()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	rep.Load.Single, rep.Load.Multi, rep.Load.Rollbacks, rep.Load.Unknown, rep.Load.API, rep.Load.Errors =
		stats.single, stats.multi, stats.rollbacks, stats.unknown, stats.api, stats.errors
	return led, nil
}

// quiesce resolves unknown outcomes, then waits until every committed event
// took effect (or the quiesce time is up).
func (r *run) quiesce(ctx context.Context, db *pgx.Conn, led *ledger, rep *Report) error {
	began := time.Now()
	resolved, err := led.resolve(ctx, db)
	if err != nil {
		return err
	}
	rep.Result.UnknownResolved = resolved
	committed := 0
	for _, w := range led.writes {
		if w.Outcome == Committed {
			committed++
		}
	}
	r.log.Info("load stopped; quiescing", "committed", committed, "unknown_committed", resolved, "writes", len(led.writes))
	deadline := time.Now().Add(r.cfg.Quiesce)
	for {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM chaos_effects").Scan(&n); err != nil {
			return fmt.Errorf("count effects: %w", err)
		}
		if n >= committed || time.Now().After(deadline) || ctx.Err() != nil {
			r.log.Info("quiesced", "applied", n, "committed", committed)
			break
		}
		pause(ctx, time.Second)
	}
	rep.QuiesceSec = time.Since(began).Seconds()
	return nil
}

// check reads the topic and the effects back and judges the run.
func (r *run) check(ctx context.Context, db *pgx.Conn, led *ledger, rep *Report) error {
	for _, m := range r.members() {
		rep.Unexpected += m.unexpected
	}
	read := readTopic
	if r.cfg.ExactlyOnce {
		read = readCommittedTopic
	}
	records, err := read(ctx, r.svc.brokers, r.topic)
	if err != nil {
		return err
	}
	applied, err := effects(ctx, db)
	if err != nil {
		return err
	}
	resolved := rep.Result.UnknownResolved
	rep.Result = Check(led.writes, records, applied)
	rep.Result.UnknownResolved = resolved
	rep.Result.ExactlyOnce = r.cfg.ExactlyOnce
	rep.Events = rep.Result.Committed
	return nil
}

// freshDatabase creates database name on the server of baseURL, dropping
// the slots earlier runs left.
func freshDatabase(ctx context.Context, baseURL, name string) error {
	db, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return fmt.Errorf("connect to the private cluster: %w", err)
	}
	defer db.Close(ctx)
	// Slots of earlier runs would keep their WAL forever.
	if _, err := db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'chaos%' AND NOT active"); err != nil {
		return fmt.Errorf("drop old slots: %w", err)
	}
	if _, err := db.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// prepare migrates the database, adds the effect table the handler
// increments, and creates the topic so the workers can subscribe at once
// (replicated 3 times on a cluster of 3 brokers or more).
func prepare(ctx context.Context, bin, dbURL string, brokers []string, topic, slot string) error {
	out, err := execOut(ctx, bin, "migrate", "--demo", "--pg-url", dbURL) // the load writes orders
	if err != nil {
		return fmt.Errorf("migrate: %w: %s", err, out)
	}
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `CREATE TABLE chaos_effects (event_id uuid PRIMARY KEY, aggregate_id text NOT NULL, applied int NOT NULL)`); err != nil {
		return fmt.Errorf("create chaos_effects: %w", err)
	}
	// The slot exists before any load: events committed earlier are not
	// in its stream, by design.
	if _, err := db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		return fmt.Errorf("create slot: %w", err)
	}
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers, ClientID: "eventforge-chaos"}.Base())
	if err != nil {
		return fmt.Errorf("connect Kafka admin: %w", err)
	}
	defer admin.Close()
	for _, t := range []string{topic, topic + outbox.DLQSuffix} {
		if err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: int16(min(3, len(brokers)))}, false); err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

func connectRetry(ctx context.Context, dbURL string) (*pgx.Conn, error) {
	var err error
	for range 60 {
		var c *pgx.Conn
		if c, err = pgx.Connect(ctx, dbURL); err == nil {
			return c, nil
		}
		pause(ctx, time.Second)
	}
	return nil, fmt.Errorf("connect to the chaos database: %w", err)
}

// effects is how often each event took effect.
func effects(ctx context.Context, db *pgx.Conn) (map[uuid.UUID]int, error) {
	rows, err := db.Query(ctx, "SELECT event_id, applied FROM chaos_effects")
	if err != nil {
		return nil, fmt.Errorf("read effects: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// readTopic reads every partition of topic from the start to its current
// high-water mark with an independent consumer.
func readTopic(_ context.Context, brokers []string, topic string) ([]Record, error) {
	sc := kafka.Config{Brokers: brokers, ClientID: "eventforge-chaos-reader"}.Base()
	sc.Consumer.Return.Errors = false
	cl, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("connect to Kafka: %w", err)
	}
	defer cl.Close()
	c, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	parts, err := cl.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	var out []Record
	for _, p := range parts {
		hw, err := cl.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("high-water mark of %s/%d: %w", topic, p, err)
		}
		if hw == 0 {
			continue
		}
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume %s/%d: %w", topic, p, err)
		}
		timeout := time.After(2 * time.Minute)
	read:
		for {
			select {
			case m := <-pc.Messages():
				r := Record{Key: string(m.Key), Partition: m.Partition, Offset: m.Offset}
				for _, h := range m.Headers {
					if string(h.Key) == "event_id" {
						r.ID, _ = uuid.Parse(string(h.Value))
					}
				}
				out = append(out, r)
				if m.Offset+1 >= hw {
					break read
				}
			case <-timeout:
				pc.Close()
				return nil, fmt.Errorf("reading %s/%d timed out", topic, p)
			}
		}
		pc.Close()
	}
	return out, nil
}

// readCommittedTopic reads every partition of topic up to its high-water
// mark as a read_committed consumer sees it: records of aborted Kafka
// transactions left out.
func readCommittedTopic(ctx context.Context, brokers []string, topic string) ([]Record, error) {
	cl, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers, ClientID: "eventforge-chaos-reader"}.Base())
	if err != nil {
		return nil, fmt.Errorf("connect to Kafka: %w", err)
	}
	defer cl.Close()
	parts, err := cl.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out []Record
	for _, p := range parts {
		err := kafka.ReadCommitted(rctx, cl, topic, p, func(offset int64, m *sarama.Record) error {
			r := Record{Key: string(m.Key), Partition: p, Offset: offset}
			for _, h := range m.Headers {
				if string(h.Key) == "event_id" {
					r.ID, _ = uuid.Parse(string(h.Value))
				}
			}
			out = append(out, r)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func writeReport(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

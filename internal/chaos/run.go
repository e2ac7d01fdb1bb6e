package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/outbox"
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
	PGRestarts     int     `json:"pg_restarts"`
	Unexpected     int     `json:"unexpected_exits"` // members that exited without being killed
	Load           struct {
		Single, Multi, Rollbacks, Unknown, API, Errors int
	} `json:"load"`
	QuiesceSec float64 `json:"quiesce_seconds"`
	Result     Result  `json:"result"`
}

// Line is the one-line summary.
func (r *Report) Line() string {
	x := r.Result
	return fmt.Sprintf("chaos: duration=%s events=%d kills=%d broker_restarts=%d pg_restarts=%d lost=%d phantom=%d order_violations=%d double_applied=%d unapplied=%d duplicates=%d",
		time.Duration(r.DurationSec*float64(time.Second)).Round(time.Second), r.Events, r.Kills, r.BrokerRestarts, r.PGRestarts,
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	if cfg.Report == "" {
		cfg.Report = filepath.Join(cfg.StateDir, "report.json")
	}
	log := cfg.Log
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	rep := &Report{Seed: cfg.Seed}
	runID := fmt.Sprintf("%d", time.Now().Unix())
	logDir := filepath.Join(cfg.StateDir, "run-"+runID)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	log.Info("starting private services", "dir", cfg.StateDir, "seed", cfg.Seed, "logs", logDir)
	svc, err := startServices(ctx, cfg.Root, cfg.StateDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := svc.down(); err != nil {
			log.Warn("stopping private services", "err", err)
		}
	}()
	dbURL, err := freshDatabase(ctx, svc.pgURL, "chaos_"+runID)
	if err != nil {
		return nil, err
	}
	prefix := "chaos" + runID + "."
	topic := prefix + "orders"
	slot := "chaos_" + runID
	if err := prepare(ctx, cfg.Bin, dbURL, svc.brokers, topic, slot); err != nil {
		return nil, err
	}
	handlers := filepath.Join(logDir, "handlers.yaml")
	if err := os.WriteFile(handlers, []byte(handlersYAML), 0o644); err != nil {
		return nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}

	brokers := strings.Join(svc.brokers, ",")
	relayArgs := []string{"cdc", "run", "--pg-url", dbURL, "--kafka-brokers", brokers, "--slot", slot, "--topic-prefix", prefix,
		"--topic-partitions", "6", "--heartbeat-interval", "2s", "--status-interval", "1s", "--shutdown-timeout", "10s"}
	if cfg.ExactlyOnce {
		relayArgs = append(relayArgs, "--exactly-once")
	}
	workerArgs := func(i int) []string {
		return []string{"worker", "run", "--pg-url", dbURL, "--kafka-brokers", brokers, "--group", "chaos-" + runID,
			"--consumer", "chaos", "--topics", topic, "--handlers", handlers, "--session-timeout", "6s",
			"--max-attempts", "50", "--max-retry-time", "10m", "--retry-backoff", "100ms", "--max-backoff", "2s"}
	}
	mk := func(name string, args []string) *member {
		return &member{name: name, bin: cfg.Bin, args: args, dir: logDir, log: log, done: make(chan struct{})}
	}
	relays := []*member{mk("relay-a", relayArgs), mk("relay-b", relayArgs)}
	workers := []*member{mk("worker-1", workerArgs(1)), mk("worker-2", workerArgs(2)), mk("worker-3", workerArgs(3))}
	api := mk("api", []string{"api", "run", "--pg-url", dbURL, "--http-addr", apiAddr})
	all := append(append([]*member{api}, relays...), workers...)
	cancels := make([]context.CancelFunc, len(all))
	for i, m := range all {
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		cancels[i] = cancel
		go m.run(mctx)
	}
	stopAll := func() {
		var wg sync.WaitGroup
		for i, m := range all {
			wg.Add(1)
			go func() { defer wg.Done(); m.stop(cancels[i]) }()
		}
		wg.Wait()
	}
	defer stopAll()

	// Load and faults.
	led := &ledger{}
	stats := &loadStats{}
	lctx, stopLoad := context.WithCancel(ctx)
	var lg sync.WaitGroup
	for i := range cfg.Writers {
		w := &sqlWriter{id: i, url: dbURL, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i+2))), led: led, stats: stats}
		lg.Add(1)
		go func() { defer lg.Done(); w.run(lctx) }()
	}
	aw := &apiWriter{base: "http://" + apiAddr, led: led, stats: stats}
	lg.Add(1)
	go func() { defer lg.Done(); aw.run(lctx) }()

	began := time.Now()
	fctx, stopFaults := context.WithTimeout(ctx, cfg.Duration)
	runFaults(fctx, rng, svc, relays, workers, !cfg.NoBrokerRestarts, rep, log)
	stopFaults()
	stopLoad()
	lg.Wait()
	rep.DurationSec = time.Since(began).Seconds()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	rep.Load.Single, rep.Load.Multi, rep.Load.Rollbacks, rep.Load.Unknown, rep.Load.API, rep.Load.Errors =
		stats.single, stats.multi, stats.rollbacks, stats.unknown, stats.api, stats.errors

	// Quiesce: resolve unknown outcomes, then wait until every committed
	// event took effect (or the quiesce time is up).
	qbegan := time.Now()
	db, err := connectRetry(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close(context.Background())
	resolved, err := led.resolve(ctx, db)
	if err != nil {
		return nil, err
	}
	committed := 0
	for _, w := range led.writes {
		if w.Outcome == Committed {
			committed++
		}
	}
	log.Info("load stopped; quiescing", "committed", committed, "unknown_committed", resolved, "writes", len(led.writes))
	deadline := time.Now().Add(cfg.Quiesce)
	for {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM chaos_effects").Scan(&n); err != nil {
			return nil, fmt.Errorf("count effects: %w", err)
		}
		if n >= committed || time.Now().After(deadline) || ctx.Err() != nil {
			log.Info("quiesced", "applied", n, "committed", committed)
			break
		}
		pause(ctx, time.Second)
	}
	rep.QuiesceSec = time.Since(qbegan).Seconds()
	for _, m := range all {
		rep.Unexpected += m.unexpected
	}
	read := readTopic
	if cfg.ExactlyOnce {
		read = readCommittedTopic
	}
	records, err := read(ctx, svc.brokers, topic)
	if err != nil {
		return nil, err
	}
	applied, err := effects(ctx, db)
	if err != nil {
		return nil, err
	}
	rep.Result = Check(led.writes, records, applied)
	rep.Result.UnknownResolved = resolved
	rep.Result.ExactlyOnce = cfg.ExactlyOnce
	rep.Events = rep.Result.Committed
	if err := writeReport(cfg.Report, rep); err != nil {
		return rep, err
	}
	if rep.Result.Violations() > 0 {
		return rep, ErrViolations
	}
	return rep, nil
}

// runFaults injects one fault every 2-6 seconds until ctx ends; without
// brokerRestarts their share goes to PostgreSQL restarts.
func runFaults(ctx context.Context, rng *rand.Rand, svc *services, relays, workers []*member, brokerRestarts bool, rep *Report, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) {
	pause(ctx, 5*time.Second) // let everything start
	for ctx.Err() == nil {
		pause(ctx, time.Duration(2000+rng.IntN(4000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		switch r := rng.IntN(100); {
		case r < 35:
			m := relays[rng.IntN(len(relays))]
			if m.kill() {
				rep.Kills++
				rep.RelayKills++
				log.Info("fault: SIGKILL", "member", m.name)
			}
		case r < 75:
			n := 1 + rng.IntN(2)
			for range n {
				m := workers[rng.IntN(len(workers))]
				if m.kill() {
					rep.Kills++
					rep.WorkerKills++
					log.Info("fault: SIGKILL", "member", m.name)
				}
			}
		case r < 88 && brokerRestarts:
			hard := rng.IntN(2) == 0
			log.Info("fault: broker restart", "sigkill", hard)
			if err := svc.restartKafka(context.WithoutCancel(ctx), hard); err != nil {
				log.Warn("broker restart", "err", err)
			}
			rep.BrokerRestarts++
		default:
			log.Info("fault: PostgreSQL immediate restart")
			if err := svc.restartPG(context.WithoutCancel(ctx)); err != nil {
				log.Warn("PostgreSQL restart", "err", err)
			}
			rep.PGRestarts++
		}
	}
}

func freshDatabase(ctx context.Context, baseURL, name string) (string, error) {
	db, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return "", fmt.Errorf("connect to the private cluster: %w", err)
	}
	defer db.Close(ctx)
	// Slots of earlier runs would keep their WAL forever.
	if _, err := db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'chaos%' AND NOT active"); err != nil {
		return "", fmt.Errorf("drop old slots: %w", err)
	}
	if _, err := db.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// prepare migrates the database, adds the effect table the handler
// increments, and creates the topic so the workers can subscribe at once.
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
		if err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 1}, false); err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
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

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

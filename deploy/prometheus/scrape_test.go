package prometheus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// slotSampleInterval is the relay's pg_replication_slots sampling interval
// (cdc.Config.SlotSampleInterval's default; no flag sets it).
const slotSampleInterval = 15 * time.Second

// TestRealPrometheusScrape runs a relay and a worker as subprocesses, has a
// real Prometheus server scrape both every second, writes events, and checks
// the answers of Prometheus's HTTP API against the database: the worker's
// applied count equals its processed_events rows, and the slot lag lies
// within what pg_current_wal_lsn() - confirmed_flush_lsn allowed while the
// relay sampled it.
func TestRealPrometheusScrape(t *testing.T) {
	promBin := prometheusBinary(t)
	env := testenv.Shared(t)
	dbURL := env.NewDatabase(t)
	slot := testenv.UniqueName("scrape")
	prefix := testenv.UniqueName("scr") + "_"
	testenv.DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, prefix)
	topic := prefix + "orders"
	group := testenv.UniqueName("scrapeg")
	createTopic(t, env.Brokers, topic)

	cdcAddr, workerAddr, promAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	startProc(t, "relay", "cdc", "run", "--pg-url", dbURL, "--kafka-brokers", strings.Join(env.Brokers, ","),
		"--slot", slot, "--topic-prefix", prefix, "--status-interval", "300ms", "--heartbeat-interval", "2s",
		"--metrics-addr", cdcAddr)
	startProc(t, "worker", "worker", "run", "--pg-url", dbURL, "--kafka-brokers", strings.Join(env.Brokers, ","),
		"--group", group, "--topics", topic, "--handlers", filepath.Join("..", "handlers", "orders.yaml"),
		"--commit-interval", "200ms", "--metrics-addr", workerAddr)
	prom := startPrometheus(t, promBin, cdcAddr, workerAddr, promAddr)

	testenv.WaitFor(t, 60*time.Second, "Prometheus scraping the relay and the worker", func() bool {
		v, ok := prom.scalar(t, `sum(up{job="eventforge"})`)
		return ok && v == 2
	})

	db := connect(t, dbURL)
	// Events committed before the new slot reached its consistent point are
	// not in it, and creating it waits for every transaction then running in
	// the cluster: write only once the relay streams (its /readyz is 200).
	testenv.WaitFor(t, 120*time.Second, "the relay streaming from its slot", func() bool {
		resp, err := http.Get("http://" + cdcAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	const events = 20
	writeOrders(t, db, events)

	// The applied count Prometheus scraped equals the worker's inbox rows.
	applied := fmt.Sprintf(`sum(eventforge_worker_events_total{job="eventforge",consumer=%q,result="applied"})`, group)
	var inbox int
	testenv.WaitFor(t, 60*time.Second, "every event applied and scraped", func() bool {
		inbox = count(t, db, `SELECT count(*) FROM processed_events WHERE consumer = $1`, group)
		v, ok := prom.scalar(t, applied)
		return inbox == events && ok && v == float64(inbox)
	})
	if v, _ := prom.scalar(t, applied); v != float64(inbox) {
		t.Errorf("Prometheus: %s = %v; processed_events holds %d rows of consumer %s", applied, v, inbox, group)
	}

	// The slot lag: a relay sample taken after `before` and scraped before
	// `after` lies within the bounds the two database readings give, since
	// the WAL end and the confirmed position only move forward.
	before := slotLSNs(t, db, slot)
	lagQuery := fmt.Sprintf(`eventforge_slot_lag_bytes{job="eventforge",slot=%q}[1m]`, slot)
	var sample promSample
	testenv.WaitFor(t, slotSampleInterval+30*time.Second, "a slot lag sample taken after the reading", func() bool {
		s, ok := prom.latest(t, lagQuery)
		sample = s
		return ok && s.at.After(before.at.Add(slotSampleInterval+2*time.Second))
	})
	after := slotLSNs(t, db, slot)
	lo, hi := before.wal-after.confirmed, after.wal-before.confirmed
	if sample.value < 0 || sample.value < float64(lo) || sample.value > float64(hi) {
		t.Errorf("Prometheus: eventforge_slot_lag_bytes = %v; database: pg_current_wal_lsn() - confirmed_flush_lsn between %d and %d (readings %+v, %+v)",
			sample.value, lo, hi, before, after)
	}
	t.Logf("slot lag %v bytes (database bounds %d..%d); applied %d = processed_events %d", sample.value, lo, hi, events, inbox)
}

// prometheusBinary returns the path of the prometheus server. CI (CI=true)
// fails without it; elsewhere the test skips with the install hint.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus not found: install it (apt-get install prometheus)")
		}
		t.Skip("prometheus not found: apt-get install prometheus")
	}
	return p
}

func createTopic(t *testing.T, brokers []string, topic string) {
	t.Helper()
	testenv.CreateTopic(t, brokers, topic, 3)
}

// startProc runs the eventforge binary with args until the test ends.
func startProc(t *testing.T, what string, args ...string) {
	t.Helper()
	startCmd(t, what, exec.Command(testenv.Binary(t), args...))
}

// startCmd runs cmd until the test ends (SIGINT, then SIGKILL after 15s),
// with no EVENTFORGE_ variables, and shows its output when the test failed.
func startCmd(t *testing.T, what string, cmd *exec.Cmd) {
	t.Helper()
	cmd.Env = append(cmd.Env, childproc.Env()...)
	testenv.StartProcess(t, what, cmd, os.Interrupt, 15*time.Second)
}

// promServer is a Prometheus server started by a test.
type promServer struct{ base string }

// startPrometheus starts Prometheus scraping the relay and the worker every
// second, with the alert rules loaded, and waits until it is ready.
func startPrometheus(t *testing.T, bin, cdcAddr, workerAddr, listen string) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("rules", "eventforge.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: eventforge
    static_configs:
      - targets: [%q]
        labels: {component: cdc}
      - targets: [%q]
        labels: {component: worker}
`, rules, cdcAddr, workerAddr)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startCmd(t, "prometheus", exec.Command(bin, "--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen, "--log.level=warn"))
	p := &promServer{base: "http://" + listen}
	testenv.WaitFor(t, 30*time.Second, "Prometheus ready", func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// promSample is one value with its timestamp.
type promSample struct {
	at    time.Time
	value float64
}

// query asks /api/v1/query and returns the result's data.
func (p *promServer) query(t *testing.T, q string) (resultType string, result json.RawMessage) {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: decode: %v", q, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s %s", q, body.Status, body.Error)
	}
	return body.Data.ResultType, body.Data.Result
}

// scalar is the value of a query that answers one series; false when it
// answers none.
func (p *promServer) scalar(t *testing.T, q string) (float64, bool) {
	t.Helper()
	typ, raw := p.query(t, q)
	var res []struct {
		Value [2]any `json:"value"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || typ != "vector" {
		t.Fatalf("query %s: %s result %s: %v", q, typ, raw, err)
	}
	switch len(res) {
	case 0:
		return 0, false
	case 1:
		return parseSample(t, res[0].Value).value, true
	}
	t.Fatalf("query %s: %d series, want at most 1: %s", q, len(res), raw)
	return 0, false
}

// latest is the newest raw sample of a range-vector query with one series.
func (p *promServer) latest(t *testing.T, q string) (promSample, bool) {
	t.Helper()
	typ, raw := p.query(t, q)
	var res []struct {
		Values [][2]any `json:"values"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || typ != "matrix" || len(res) > 1 {
		t.Fatalf("query %s: %s result %s: %v", q, typ, raw, err)
	}
	if len(res) == 0 || len(res[0].Values) == 0 {
		return promSample{}, false
	}
	return parseSample(t, res[0].Values[len(res[0].Values)-1]), true
}

// parseSample decodes the API's [unix seconds, "value"] pair.
func parseSample(t *testing.T, v [2]any) promSample {
	t.Helper()
	ts, ok1 := v[0].(float64)
	s, ok2 := v[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if !ok1 || !ok2 || err != nil {
		t.Fatalf("sample %v: %v", v, err)
	}
	return promSample{at: time.Unix(0, int64(ts*float64(time.Second))), value: f}
}

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func count(t *testing.T, db *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// writeOrders writes n orders, each with its order.created outbox event in
// the same transaction, as the API does.
func writeOrders(t *testing.T, db *pgx.Conn, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := testenv.UniqueName(fmt.Sprintf("o%d", i))
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO orders (id, status, customer, amount, currency) VALUES ($1, 'created', 'c', 100, 'EUR')`, id); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
				VALUES (gen_random_uuid(), 'orders', $1, 'order.created', jsonb_build_object('id', $1::text))`, id)
			return err
		})
		if err != nil {
			t.Fatalf("write order %s: %v", id, err)
		}
	}
}

// lsnReading is one reading of the slot's positions, in bytes.
type lsnReading struct {
	at             time.Time
	wal, confirmed int64
}

func slotLSNs(t *testing.T, db *pgx.Conn, slot string) lsnReading {
	t.Helper()
	r := lsnReading{at: time.Now()}
	err := db.QueryRow(context.Background(), `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, (confirmed_flush_lsn - '0/0'::pg_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&r.wal, &r.confirmed)
	if err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	return r
}

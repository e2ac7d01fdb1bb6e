package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
)

// TestBacklogThroughput measures events/s applied from a backlog by one
// Runner with the demo SQL handler (an UPDATE of orders per event, plus the
// inbox row), in batch mode and one by one. It is a measurement, not a
// check, so it runs only with EVENTFORGE_BENCH=1:
//
//	EVENTFORGE_BENCH=1 go test -run TestBacklogThroughput -v -timeout 60m ./worker/
//
// EVENTFORGE_BENCH_EVENTS sets the backlog (default 200000; the issue's
// figure is 1000000), EVENTFORGE_BENCH_BATCHES the batch sizes to run
// (comma-separated, default "0,1": 0 is the default batch size), and
// EVENTFORGE_BENCH_CPUPROFILE=PATH writes a CPU profile of the apply phase
// to PATH.batchN (go tool pprof worker.test PATH.batchN);
// EVENTFORGE_BENCH_PIPELINED=1 drops the handler's batch_sql. Each run
// also reports the CPU seconds spent while applying by this process (the
// worker), by the PostgreSQL backends of its database, by the shared
// PostgreSQL cluster (other users' work included) and by the shared broker,
// and the machine's busy time, to show what bounds the rate.
func TestBacklogThroughput(t *testing.T) {
	if os.Getenv("EVENTFORGE_BENCH") != "1" {
		t.Skip("measurement: set EVENTFORGE_BENCH=1")
	}
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("EVENTFORGE_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	batches := []int{0, 1}
	if v := os.Getenv("EVENTFORGE_BENCH_BATCHES"); v != "" {
		batches = batches[:0]
		for _, s := range strings.Split(v, ",") {
			b, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || b < 0 {
				t.Fatalf("EVENTFORGE_BENCH_BATCHES: %q is not a batch size", s)
			}
			batches = append(batches, b)
		}
	}
	for _, batch := range batches {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) { benchBacklog(t, n, batch) })
	}
}

func benchBacklog(t *testing.T, n, batch int) {
	f := newFixture(t, 6)
	ids := make([]string, n)
	evs := make([]*outbox.Event, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%07d", i)
		evs[i] = f.orderEvent(ids[i])
	}
	f.insertOrders(t, ids...)
	produce(t, f.brokers, evs...)
	evs = nil
	f.exec(t, `VACUUM ANALYZE orders`)
	pcfg, err := pgxpool.ParseConfig(f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cfg := f.config()
	cfg.BatchSize = batch
	cfg.CommitInterval = time.Second
	r := start(t, cfg, pool, benchHandler(t, f))
	waitFor(t, time.Minute, "group joined", func() bool { return r.Ready(context.Background()) == nil })
	dbName := f.dbName(t)
	if path := os.Getenv("EVENTFORGE_BENCH_CPUPROFILE"); path != "" {
		stop := cpuProfile(t, fmt.Sprintf("%s.batch%d", path, batch))
		defer stop()
	}
	before := sampleCPU(t, f, dbName)
	begin := time.Now()
	waitFor(t, 60*time.Minute, "backlog applied", func() bool { return r.events(f.topic, resultApplied) == n })
	took := time.Since(begin)
	// Sampled while the pool's connections are open: a backend's CPU time
	// is gone once it exits.
	after := sampleCPU(t, f, dbName)
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != n {
		t.Errorf("%d of %d orders applied once", got, n)
	}
	if got := f.count(t, `SELECT count(*) FROM processed_events`); got != n {
		t.Errorf("%d inbox rows for %d events", got, n)
	}
	batches := r.metric("eventforge_worker_batch_size")
	t.Logf("RESULT batch-size=%d events=%d seconds=%.1f events/s=%.0f mean-batch=%.0f", batch, n, took.Seconds(), float64(n)/took.Seconds(), float64(n)/batches)
	d := after.sub(before)
	t.Logf("CPU seconds while applying (%.1f s wall): worker %.1f, its PostgreSQL backends %.1f, PostgreSQL cluster %.1f, Kafka broker %.1f; machine busy %.1f of %.1f",
		took.Seconds(), d.self, d.backends, d.cluster, d.kafka, d.busy, d.total)
	t.Logf("CPU µs per event: worker %.1f, PostgreSQL backends %.1f, cluster %.1f, broker %.1f",
		d.self*1e6/float64(n), d.backends*1e6/float64(n), d.cluster*1e6/float64(n), d.kafka*1e6/float64(n))
}

// benchHandler is sqlCounting, or sqlCountingPipelined when
// EVENTFORGE_BENCH_PIPELINED=1.
func benchHandler(t testing.TB, f *fixture) worker.Handler {
	if os.Getenv("EVENTFORGE_BENCH_PIPELINED") == "1" {
		return sqlCountingPipelined(t, f)
	}
	return sqlCounting(t, f)
}

// cpuProfile profiles this process's CPU into path until stop is called.
func cpuProfile(t testing.TB, path string) (stop func()) {
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := out.Close(); err != nil {
			t.Error(err)
		}
	}
}

func (f *fixture) dbName(t testing.TB) string {
	var name string
	if err := f.pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// cpuSample is cumulative CPU seconds at one moment.
type cpuSample struct {
	self     float64 // this process: the worker (and the test's polling)
	backends float64 // PostgreSQL backends connected to the test's database
	cluster  float64 // the shared PostgreSQL cluster: every process, exited ones too
	kafka    float64 // the shared broker
	busy     float64 // the machine, all cores
	total    float64
}

func (a cpuSample) sub(b cpuSample) cpuSample {
	return cpuSample{a.self - b.self, a.backends - b.backends, a.cluster - b.cluster, a.kafka - b.kafka, a.busy - b.busy, a.total - b.total}
}

// sampleCPU reads the CPU seconds of this process, of the PostgreSQL
// backends connected to db, of the shared cluster and of the shared broker
// (found through the pid files of deploy/local).
func sampleCPU(t testing.TB, f *fixture, db string) cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.self = tv(ru.Utime) + tv(ru.Stime)
	}
	mine := map[int]bool{}
	rows, err := f.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = $1`, db)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		mine[pid] = true
	}
	rows.Close()
	state := sharedStateDir(t)
	postmaster := pidFile(filepath.Join(state, "pg", "data", "postmaster.pid"))
	if st, ok := procStat(postmaster); ok {
		s.cluster = st.own + st.children // exited backends are in children
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		if st, ok := procStat(pid); ok && st.ppid == postmaster && postmaster != 0 {
			s.cluster += st.own
			if mine[pid] {
				s.backends += st.own
			}
		}
	}
	if st, ok := procStat(pidFile(filepath.Join(state, "kafka", "kafka.pid"))); ok {
		s.kafka = st.own
	}
	s.busy, s.total = machineCPU()
	return s
}

func sharedStateDir(t testing.TB) string {
	if d := os.Getenv("EVENTFORGE_STATE_DIR"); d != "" {
		return d
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".eventforge")
}

// pidFile reads the pid on the first line of path; 0 when unreadable.
func pidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

func tv(v syscall.Timeval) float64 { return float64(v.Sec) + float64(v.Usec)/1e6 }

// clockTicks is USER_HZ, the unit of /proc times (100 on Linux).
const clockTicks = 100

// procTimes are a process's parent and CPU seconds: its own, and those of
// its exited and waited-for children.
type procTimes struct {
	ppid          int
	own, children float64
}

// procStat reads /proc/PID/stat (see proc(5)).
func procStat(pid int) (procTimes, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || pid == 0 {
		return procTimes{}, false
	}
	s := string(b)
	closing := strings.LastIndexByte(s, ')')
	if closing < 0 {
		return procTimes{}, false
	}
	// After the name: state, ppid, ... utime (14th field of the line),
	// stime, cutime, cstime.
	f := strings.Fields(s[closing+1:])
	if len(f) < 15 {
		return procTimes{}, false
	}
	num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v / clockTicks }
	ppid, _ := strconv.Atoi(f[1])
	return procTimes{ppid: ppid, own: num(11) + num(12), children: num(13) + num(14)}, true
}

// machineCPU returns the busy and total CPU seconds of the machine.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	for i, fld := range fields[1:] {
		v, _ := strconv.ParseFloat(fld, 64)
		total += v / clockTicks
		if i != 3 && i != 4 { // idle, iowait
			busy += v / clockTicks
		}
	}
	return busy, total
}

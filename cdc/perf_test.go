package cdc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestBigTransactionMemory runs in make test (a million-row
// transaction under 100 MB). The others measure and are not part of the
// normal run:
//
//	EVENTFORGE_BIG=1 go test -run TestBacklog -v -timeout 30m ./cdc/
//	EVENTFORGE_BENCH=1 go test -run TestCommitToAckLatency -v ./cdc/

func needEnv(t *testing.T, name string) {
	if os.Getenv(name) == "" {
		t.Skipf("measurement: set %s=1 to run", name)
	}
}

// topicRecords is the number of records in topic (high minus low water
// marks over all partitions); 0 while the topic or a leader is missing.
func topicRecords(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	n, err := sumPartitions(t, brokers, topic, func(cl sarama.Client, p int32) (int64, error) {
		return cl.GetOffset(topic, p, sarama.OffsetNewest)
	})
	if err != nil {
		return 0
	}
	return n
}

// stableRecords is the number of records of topic a read_committed
// consumer can read now: over all partitions, the last stable offset (the
// first offset of a transaction still open, else the high watermark) less
// the oldest offset. Unlike committedCounts it does not wait for an open
// transaction to be decided, so it answers at once while a crashed
// producer's transaction is still open.
func stableRecords(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	n, err := sumPartitions(t, brokers, topic, func(cl sarama.Client, p int32) (int64, error) {
		return lastStableOffset(cl, topic, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sumPartitions adds, over every partition of topic, the offset end gives
// less the partition's oldest offset.
func sumPartitions(t testing.TB, brokers []string, topic string, end func(cl sarama.Client, p int32) (int64, error)) (int64, error) {
	t.Helper()
	cl, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ps, err := cl.Partitions(topic)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range ps {
		hi, err := end(cl, p)
		if err != nil {
			return 0, err
		}
		lo, err := cl.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return 0, err
		}
		n += hi - lo
	}
	return n, nil
}

// lastStableOffset asks the partition's leader for the latest offset as a
// read_committed consumer sees it (ListOffsets at isolation level
// READ_COMMITTED): the last stable offset.
func lastStableOffset(cl sarama.Client, topic string, p int32) (int64, error) {
	leader, err := cl.Leader(topic, p)
	if err != nil {
		return 0, err
	}
	req := &sarama.OffsetRequest{Version: 2, IsolationLevel: sarama.ReadCommitted}
	req.AddBlock(topic, p, sarama.OffsetNewest, 1)
	resp, err := leader.GetAvailableOffsets(req)
	if err != nil {
		return 0, err
	}
	b := resp.GetBlock(topic, p)
	if b == nil {
		return 0, fmt.Errorf("last stable offset of %s/%d: no answer for the partition", topic, p)
	}
	if !errors.Is(b.Err, sarama.ErrNoError) {
		return 0, fmt.Errorf("last stable offset of %s/%d: %w", topic, p, b.Err)
	}
	return b.Offset, nil
}

// vmHWM is the peak resident set size of pid in kB.
func vmHWM(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

const bulkInsert = `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
	SELECT gen_random_uuid(), 'orders', 'k' || (g %% 1000), 'order.created',
	       jsonb_build_object('seq', g, 'customer', 'c' || (g %% 97), 'amount', g %% 10000)
	FROM generate_series(%d, %d) AS g`

// TestBigTransactionMemory relays one 1,000,000-row transaction through a
// relay subprocess and reports its peak RSS (target: under 100 MB).
func TestBigTransactionMemory(t *testing.T) {
	t.Parallel()
	const rows = 1_000_000
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	p := startProc(t, relayArgs(cfg)...)
	p.waitStreaming(t)
	began := time.Now()
	mustExec(t, db, fmt.Sprintf(bulkInsert, 1, rows))
	after := currentLSN(t, db)
	t.Logf("1 transaction of %d rows committed in %s", rows, time.Since(began).Round(time.Millisecond))
	committed := time.Now()
	waitFor(t, 20*time.Minute, "slot confirmed past the transaction", func() bool { return slotConfirmed(t, db, cfg.Slot) >= after })
	took := time.Since(committed)
	n := topicRecords(t, env.Brokers, cfg.TopicPrefix+"orders")
	if n < rows {
		t.Fatalf("%d records in Kafka, want at least %d", n, rows)
	}
	hwm := vmHWM(t, p.cmd.Process.Pid)
	t.Logf("relayed %d events of one transaction in %s (%.0f events/s after commit); relay peak RSS (VmHWM) %d MB", rows, took.Round(time.Millisecond), rows/took.Seconds(), hwm>>10)
	if hwm > 100<<10 {
		t.Errorf("peak RSS %d MB is over 100 MB", hwm>>10)
	}
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestBacklogDrainRate writes a backlog while no relay runs (1,000-row
// transactions), then measures how fast a relay subprocess drains it.
func TestBacklogDrainRate(t *testing.T) {
	needEnv(t, "EVENTFORGE_BIG")
	events := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("EVENTFORGE_BIG_EVENTS")); err == nil && v > 0 {
		events = v
	}
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	// Create the slot first (a relay that stops at once), so the backlog is
	// retained for it.
	p := startProc(t, relayArgs(cfg)...)
	p.waitStreaming(t)
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for from := 1; from <= events; from += 1000 {
		mustExec(t, db, fmt.Sprintf(bulkInsert, from, min(from+999, events)))
	}
	after := currentLSN(t, db)
	began := time.Now()
	p = startProc(t, relayArgs(cfg)...)
	waitFor(t, 30*time.Minute, "backlog drained", func() bool { return slotConfirmed(t, db, cfg.Slot) >= after })
	took := time.Since(began)
	n := topicRecords(t, env.Brokers, cfg.TopicPrefix+"orders")
	if n < int64(events) {
		t.Fatalf("%d records in Kafka, want at least %d", n, events)
	}
	t.Logf("drained a backlog of %d events (1,000-row transactions) in %s: %.0f events/s (incl. process start); relay peak RSS %d MB",
		events, took.Round(time.Millisecond), float64(events)/took.Seconds(), vmHWM(t, p.cmd.Process.Pid)>>10)
	if code := p.terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestCommitToAckLatency writes a steady 2,000 events/s (20-event
// transactions every 10ms) for 30s and reports the relay's commit-to-ack
// quantiles from eventforge_cdc_commit_to_ack_seconds.
func TestCommitToAckLatency(t *testing.T) {
	needEnv(t, "EVENTFORGE_BENCH")
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	mustExec(t, db, fmt.Sprintf(bulkInsert, 1, 1)) // create the topic before measuring
	waitFor(t, 30*time.Second, "topic", func() bool { return topicRecords(t, env.Brokers, cfg.TopicPrefix+"orders") > 0 })
	before := histogram(t, r)

	const perTxn, tick, dur = 20, 10 * time.Millisecond, 30 * time.Second
	tk := time.NewTicker(tick)
	defer tk.Stop()
	end := time.Now().Add(dur)
	seq, late := 2, 0
	for time.Now().Before(end) {
		<-tk.C
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := db.Exec(ctx, fmt.Sprintf(bulkInsert, seq, seq+perTxn-1)); err != nil {
			t.Fatal(err)
		}
		cancel()
		seq += perTxn
		if len(tk.C) > 0 {
			late++
		}
	}
	after := currentLSN(t, db)
	waitFor(t, time.Minute, "all acked", func() bool { return slotConfirmed(t, db, cfg.Slot) >= after })
	h := histogram(t, r).sub(before)
	t.Logf("%d events at %.0f events/s (%d late ticks): commit-to-ack p50 %.1f ms, p99 %.1f ms, max bucket %.1f ms",
		h.count, float64(seq-2)/dur.Seconds(), late, 1000*h.quantile(0.50), 1000*h.quantile(0.99), 1000*h.quantile(1))
}

type hist struct {
	count  uint64
	bounds []float64
	cum    []uint64
}

func histogram(t testing.TB, r *running) hist {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "eventforge_cdc_commit_to_ack_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			out := hist{count: h.GetSampleCount()}
			for _, b := range h.GetBucket() {
				out.bounds = append(out.bounds, b.GetUpperBound())
				out.cum = append(out.cum, b.GetCumulativeCount())
			}
			return out
		}
	}
	return hist{}
}

func (h hist) sub(o hist) hist {
	out := hist{count: h.count - o.count, bounds: h.bounds, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		out.cum[i] = h.cum[i]
		if i < len(o.cum) {
			out.cum[i] -= o.cum[i]
		}
	}
	return out
}

// quantile interpolates linearly inside the bucket holding q.
func (h hist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	i := sort.Search(len(h.cum), func(i int) bool { return float64(h.cum[i]) >= rank })
	if i == len(h.cum) {
		return math.Inf(1)
	}
	lo, below := 0.0, uint64(0)
	if i > 0 {
		lo, below = h.bounds[i-1], h.cum[i-1]
	}
	in := h.cum[i] - below
	if in == 0 {
		return h.bounds[i]
	}
	return lo + (h.bounds[i]-lo)*(rank-float64(below))/float64(in)
}

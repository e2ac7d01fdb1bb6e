package bench_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/internal/tools/bench"
)

// TestBenchSmoke runs `eventforge bench` end to end on the local services
// with tiny sizes (about 20 s) and checks the JSON against what was written:
// every stage ran for real, counted what it wrote, and reached its end.
func TestBenchSmoke(t *testing.T) {
	env := testenv.Shared(t)
	bin := testenv.Binary(t)
	const events, workerEvents = 2000, 1500
	rep, output := runBench(t, bin, env, "--stages", "drain,steady,worker", "--modes", "at-least-once,exactly-once", "--events", "2000",
		"--steady-duration", "2s", "--rates", "200", "--worker-events", "1500", "--worker-single-events", "1500", "--writers", "4")
	if !strings.Contains(output, "PG_RECVLOGICAL EV/S") || !strings.Contains(output, "Targets:") {
		t.Errorf("no table in the output:\n%s", output)
	}
	if rep.Machine.NumCPU == 0 || rep.Machine.PostgreSQL == "" || rep.Machine.GoVersion == "" || !strings.Contains(rep.Command, "bench") {
		t.Errorf("machine/command not described: %+v %q", rep.Machine, rep.Command)
	}
	byStage := map[string][]bench.Row{}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s %s failed: %s", r.Stage, r.Shape, r.Error)
		}
		byStage[r.Stage] = append(byStage[r.Stage], r)
	}
	if len(byStage["drain"]) != 4 || len(byStage["steady"]) != 2 || len(byStage["worker"]) != 2 {
		t.Fatalf("rows per stage: %v", byStage)
	}
	for _, r := range byStage["drain"] {
		end, err1 := pglogrepl.ParseLSN(r.EndLSN)
		confirmed, err2 := pglogrepl.ParseLSN(r.ConfirmedLSN)
		switch {
		case r.Events != events || r.KafkaRecords == nil || *r.KafkaRecords != events:
			t.Errorf("drain %s: %d events, %v records in Kafka; want %d of each", r.Shape, r.Events, r.KafkaRecords, events)
		case !r.RecvLogicalRan || r.RecvLogicalPerSec == nil || *r.RecvLogicalPerSec <= 0 || r.Ratio == nil || *r.Ratio <= 0:
			t.Errorf("drain %s: pg_recvlogical did not run: %+v", r.Shape, r)
		case r.EventsPerSec <= 0 || r.CPUPerM == nil || r.PeakRSSMB == nil || *r.PeakRSSMB <= 0:
			t.Errorf("drain %s: no relay rate or resources: %+v", r.Shape, r)
		case err1 != nil || err2 != nil || !r.SlotReachedEnd || confirmed < end:
			t.Errorf("drain %s: slot confirmed %s, end %s (%v %v)", r.Shape, r.ConfirmedLSN, r.EndLSN, err1, err2)
		case r.RecvLogicalCPUPerM == nil || r.ProduceRequests == nil || *r.ProduceRequests <= 0 || *r.ProduceRequests > events ||
			r.RecordsPerRequest == nil || *r.RecordsPerRequest != float64(events)/float64(*r.ProduceRequests):
			t.Errorf("drain %s: pg_recvlogical CPU %v, %v produce requests for %d events, %v records per request",
				r.Shape, r.RecvLogicalCPUPerM, r.ProduceRequests, events, r.RecordsPerRequest)
		case r.WalSenderCPUPerM == nil || *r.WalSenderCPUPerM < 0:
			// The test's PostgreSQL runs on this machine: its WAL
			// sender's CPU is readable.
			t.Errorf("drain %s: no CPU of the relay's WAL sender: %v", r.Shape, r.WalSenderCPUPerM)
		}
	}
	s := byStage["steady"][0]
	if s.Events <= 0 || s.EventsPerSec <= 0 || s.LatencyCount == nil || *s.LatencyCount != s.Events ||
		s.P50Ms == nil || s.P99Ms == nil || s.P999Ms == nil || *s.P50Ms > *s.P99Ms || s.MaxSlotLag == nil {
		t.Errorf("steady: every written event must have a latency sample and the quantiles must order: %+v", s)
	}
	if s.ServerP50Ms == nil || s.ServerP99Ms == nil || *s.ServerP50Ms > *s.ServerP99Ms {
		t.Errorf("steady: the server's share (commit_to_receive) must be measured: %+v", s)
	}
	for _, r := range byStage["worker"] {
		if r.Applied == nil || *r.Applied != workerEvents || r.EventsPerSec <= 0 || r.PeakRSSMB == nil {
			t.Errorf("worker %s: applied %v of %d at %.0f events/s", r.Shape, r.Applied, workerEvents, r.EventsPerSec)
		}
	}
	if len(rep.Targets) == 0 {
		t.Error("no targets evaluated")
	}
}

// TestBenchSmokeRepeat repeats one drain shape (about 10 s): one row per
// run, then the summary row of the runs; the other shape does not run.
func TestBenchSmokeRepeat(t *testing.T) {
	env := testenv.Shared(t)
	bin := testenv.Binary(t)
	rep, output := runBench(t, bin, env, "--stages", "drain", "--shapes", "single", "--modes", "at-least-once", "--events", "2000", "--repeat", "2")
	var runs []int
	var sum *bench.Row
	for i, r := range rep.Results {
		switch {
		case r.Shape != bench.ShapeSingle || r.Runs != 2 || r.Error != "":
			t.Errorf("row %+v: want single-row runs of 2 that did not fail", r)
		case r.Summary != nil:
			sum = &rep.Results[i]
		default:
			runs = append(runs, r.Run)
			if r.KafkaRecords == nil || *r.KafkaRecords != 2000 || r.RecordsPerRequest == nil {
				t.Errorf("run %d: %v records in Kafka, %v records per request", r.Run, r.KafkaRecords, r.RecordsPerRequest)
			}
		}
	}
	if len(runs) != 2 || runs[0] != 1 || runs[1] != 2 || sum == nil || sum.Summary.Runs != 2 {
		t.Fatalf("runs %v, summary %+v", runs, sum)
	}
	lo, hi := min(rep.Results[0].EventsPerSec, rep.Results[1].EventsPerSec), max(rep.Results[0].EventsPerSec, rep.Results[1].EventsPerSec)
	if sum.Summary.EventsPerSecMin != lo || sum.Summary.EventsPerSecMax != hi || sum.EventsPerSec != (lo+hi)/2 {
		t.Errorf("summary %+v of %v and %v", sum.Summary, lo, hi)
	}
	for _, want := range []string{"single-row txns, run 1/2", "single-row txns, run 2/2", "single-row txns, median of 2"} {
		if !strings.Contains(output, want) {
			t.Errorf("table lacks %q:\n%s", want, output)
		}
	}
}

// runBench runs `eventforge bench` with args on the shared services (no
// EVENTFORGE_ variables) and returns its JSON report and output.
func runBench(t *testing.T, bin string, env *testenv.Env, args ...string) (bench.Report, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	cmd := exec.Command(bin, append([]string{"bench", "--pg-url", env.PGURL, "--kafka-brokers", strings.Join(env.Brokers, ","),
		"--json-out", out}, args...)...)
	cmd.Env = childproc.Env()
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("eventforge bench: %v\n%s", err, output)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, string(output)
}

// TestBenchSmokeSteadyRoundsAndKafka repeats the steady stage in two rounds
// of both modes and runs the kafka stage (about 40 s): a pooled row per mode
// holds every run's samples, and the producer alone measured a latency for
// every record it handed over, in both modes.
func TestBenchSmokeSteadyRoundsAndKafka(t *testing.T) {
	env := testenv.Shared(t)
	bin := testenv.Binary(t)
	rep, output := runBench(t, bin, env, "--stages", "steady,kafka", "--modes", "at-least-once,exactly-once",
		"--steady-duration", "2s", "--rates", "200", "--writers", "4", "--repeat", "2")
	samples := map[string]int64{} // mode -> samples of its steady runs
	pooled := map[string]*bench.Row{}
	kafkaRows := map[string]*bench.Row{}
	for i, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s %s failed: %s", r.Stage, r.Shape, r.Error)
			continue
		}
		switch {
		case r.Stage == bench.StageSteady && r.Summary != nil:
			pooled[r.Mode] = &rep.Results[i]
		case r.Stage == bench.StageSteady && r.LatencyCount != nil:
			samples[r.Mode] += *r.LatencyCount
		case r.Stage == bench.StageKafka:
			kafkaRows[r.Mode] = &rep.Results[i]
		}
	}
	for _, mode := range []string{"", bench.DeliveryExactlyOnce} {
		p := pooled[mode]
		if p == nil || p.Summary.Runs != 2 || p.LatencyCount == nil || *p.LatencyCount != samples[mode] || samples[mode] < 2*400 ||
			p.P99Ms == nil || *p.P50Ms > *p.P99Ms || p.Summary.P99MsMin == nil || *p.Summary.P99MsMin > *p.Summary.P99MsMax {
			t.Errorf("mode %q: pooled row %+v over %d samples of its runs", mode, p, samples[mode])
		}
		k := kafkaRows[mode]
		if k == nil || k.Events != 400 || k.LatencyCount == nil || *k.LatencyCount != k.Events || *k.P50Ms <= 0 || *k.P50Ms > *k.P99Ms {
			t.Errorf("mode %q: kafka row %+v: want a latency for each of the 400 records", mode, k)
		}
	}
	for _, want := range []string{"200/s single-row txns, run 2/2", "200/s single-row txns, exactly-once, 2 runs pooled", "200/s records, exactly-once"} {
		if !strings.Contains(output, want) {
			t.Errorf("table lacks %q:\n%s", want, output)
		}
	}
}

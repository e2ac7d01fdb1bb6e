package bench_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/internal/bench"
	"github.com/eventforge/eventforge/internal/testenv"
)

// TestBenchSmoke runs `eventforge bench` end to end on the local services
// with tiny sizes (about 20 s) and checks the JSON against what was written:
// every stage ran for real, counted what it wrote, and reached its end.
func TestBenchSmoke(t *testing.T) {
	env := testenv.Shared(t)
	bin := testenv.Binary(t)
	const events, workerEvents = 2000, 1500
	out := filepath.Join(t.TempDir(), "results.json")
	cmd := exec.Command(bin, "bench",
		"--pg-url", env.PGURL, "--kafka-brokers", strings.Join(env.Brokers, ","),
		"--stages", "drain,steady,worker", "--modes", "at-least-once,exactly-once", "--events", "2000", "--steady-duration", "2s", "--rates", "200",
		"--worker-events", "1500", "--worker-single-events", "1500", "--writers", "4", "--json-out", out)
	var env2 []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EVENTFORGE_") {
			env2 = append(env2, kv)
		}
	}
	cmd.Env = env2
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("eventforge bench: %v\n%s", err, output)
	}
	if !strings.Contains(string(output), "PG_RECVLOGICAL EV/S") || !strings.Contains(string(output), "Targets:") {
		t.Errorf("no table in the output:\n%s", output)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
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

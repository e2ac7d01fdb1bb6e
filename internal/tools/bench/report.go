package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Stage names, as --stages takes them.
const (
	StageDrain  = "drain"
	StageSteady = "steady"
	StageWorker = "worker"
	// StageKafka measures the relay's producer alone, without PostgreSQL:
	// not among the default stages.
	StageKafka = "kafka"
)

// Row is one measurement: a drain shape, a steady rate or a worker mode.
// Optional figures are nil when they do not apply.
type Row struct {
	Stage string `json:"stage"`
	Shape string `json:"shape"`
	Mode  string `json:"mode,omitempty"` // "exactly-once" for rows of cdc run --exactly-once; empty: at-least-once
	// ValueSchema is "avro" for rows of cdc run --value-schema avro; empty:
	// JSON values.
	ValueSchema string `json:"value_schema,omitempty"`
	// Run is the run (1..Runs) of a drain or steady rate repeated Runs
	// times (--repeat); both are 0 when it ran once. The summary row of the
	// runs has Run 0 and a Summary; its figures are the runs' medians, but
	// for a steady rate's latencies, which are quantiles of all the runs'
	// samples pooled.
	Run          int      `json:"run,omitempty"`
	Runs         int      `json:"runs,omitempty"`
	Outlier      bool     `json:"outlier,omitempty"` // a run below half the median events/s of its runs
	Summary      *Spread  `json:"summary,omitempty"`
	Events       int64    `json:"events"`
	Seconds      float64  `json:"seconds"`
	EventsPerSec float64  `json:"events_per_sec"`
	TargetPerSec *float64 `json:"target_events_per_sec,omitempty"`
	WriterShort  bool     `json:"writer_short,omitempty"`

	RecvLogicalRan     bool     `json:"pg_recvlogical_ran,omitempty"`
	RecvLogicalSeconds *float64 `json:"pg_recvlogical_seconds,omitempty"`
	RecvLogicalPerSec  *float64 `json:"pg_recvlogical_events_per_sec,omitempty"`
	Ratio              *float64 `json:"ratio,omitempty"`
	// RecvLogicalCPUPerM is pg_recvlogical's CPU (user + system) seconds per
	// million events, beside the relay's CPUPerM.
	RecvLogicalCPUPerM *float64 `json:"pg_recvlogical_cpu_seconds_per_million,omitempty"`
	// WalSenderCPUPerM and RecvLogicalWalSenderCPUPerM are the CPU seconds
	// per million events of the WAL sender serving the relay and the one
	// serving pg_recvlogical (sampled every 100 ms, so up to 100 ms short),
	// when PostgreSQL runs on the bench's machine.
	WalSenderCPUPerM            *float64 `json:"walsender_cpu_seconds_per_million,omitempty"`
	RecvLogicalWalSenderCPUPerM *float64 `json:"pg_recvlogical_walsender_cpu_seconds_per_million,omitempty"`
	// ProduceRequests is the relay's eventforge_cdc_produce_requests_total at
	// the end of a drain; RecordsPerRequest is events / ProduceRequests.
	ProduceRequests   *int64   `json:"produce_requests,omitempty"`
	RecordsPerRequest *float64 `json:"records_per_request,omitempty"`
	EndLSN            string   `json:"end_lsn,omitempty"`
	ConfirmedLSN      string   `json:"confirmed_lsn,omitempty"`
	SlotReachedEnd    bool     `json:"slot_reached_end,omitempty"`
	KafkaRecords      *int64   `json:"kafka_records,omitempty"`
	Applied           *int64   `json:"applied,omitempty"`

	P50Ms        *float64 `json:"p50_ms,omitempty"`
	P99Ms        *float64 `json:"p99_ms,omitempty"`
	P999Ms       *float64 `json:"p999_ms,omitempty"`
	LatencyCount *int64   `json:"latency_samples,omitempty"`
	MaxSlotLag   *int64   `json:"max_slot_lag_bytes,omitempty"`

	CPUSeconds  *float64 `json:"cpu_seconds,omitempty"`
	CPUPerM     *float64 `json:"cpu_seconds_per_million,omitempty"`
	PeakRSSMB   *float64 `json:"peak_rss_mb,omitempty"`
	WriterP50Ms *float64 `json:"writer_commit_p50_ms,omitempty"`
	WriterP99Ms *float64 `json:"writer_commit_p99_ms,omitempty"`
	// ServerP50Ms and ServerP99Ms are the server's share of the latency:
	// commit timestamp to the relay's receipt (commit_to_receive).
	ServerP50Ms *float64 `json:"server_p50_ms,omitempty"`
	ServerP99Ms *float64 `json:"server_p99_ms,omitempty"`
	LoadAvg     float64  `json:"load_average_1m"` // of the machine when the measurement ended
	Profile     string   `json:"profile,omitempty"`
	Note        string   `json:"note,omitempty"`
	Error       string   `json:"error,omitempty"`

	// latency and server are a steady run's histogram deltas, which the
	// summary of repeated runs pools.
	latency, server Histogram
}

// Target is one performance goal (docs/bench.md#targets) with what was measured against it.
type Target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	Status   string `json:"status"` // PASS, MISS or "n/a" (not measured in this run)
}

// Machine is where the bench ran.
type Machine struct {
	NumCPU     int               `json:"nproc"`
	CPUModel   string            `json:"cpu_model,omitempty"`
	MemoryMB   int64             `json:"memory_mb"`
	OS         string            `json:"os"`
	Kernel     string            `json:"kernel,omitempty"`
	GoVersion  string            `json:"go_version"`
	PostgreSQL string            `json:"postgresql"`
	PGSettings map[string]string `json:"postgresql_settings,omitempty"`
	Kafka      string            `json:"kafka"`
	Git        string            `json:"git"`
	Binary     string            `json:"eventforge_version,omitempty"`
}

// Report is the JSON the bench writes.
type Report struct {
	Date    time.Time `json:"date"`
	Command string    `json:"command"`
	Machine Machine   `json:"machine"`
	Config  Settings  `json:"config"`
	Results []Row     `json:"results"`
	Targets []Target  `json:"targets"`
	Seconds float64   `json:"seconds"`
}

// Settings are the sizes the run used.
type Settings struct {
	Stages             []string `json:"stages"`
	Modes              []string `json:"modes,omitempty"`
	ValueSchema        string   `json:"value_schema,omitempty"`
	Events             int      `json:"events"`
	SteadyDuration     string   `json:"steady_duration"`
	Rates              []Rate   `json:"rates"`
	WorkerEvents       int      `json:"worker_events"`
	WorkerSingleEvents int      `json:"worker_single_events"`
	Writers            int      `json:"writers"`
	StatusInterval     string   `json:"relay_status_interval"`
}

func f64(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func i64(v int64) *int64 { return &v }

// WriteJSON writes the report to path, creating its folder.
func (r *Report) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable prints the results table and the targets.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STAGE\tSHAPE/RATE\tEVENTS\tSECONDS\tEVENTS/S\tPG_RECVLOGICAL EV/S\tRATIO\tP50 MS\tP99 MS\tP99.9 MS\tMAX SLOT LAG\tCPU S/M\tPG_RECVLOGICAL CPU S/M\tREC/REQ\tPEAK RSS MB\t NOTE")
	for _, row := range r.Results {
		note := row.Note
		if row.WriterShort {
			note = joinNote("WRITER SHORT of target", note)
		}
		if row.Outlier {
			note = joinNote("OUTLIER: below half the median events/s", note)
		}
		if row.Error != "" {
			note = joinNote("ERROR: "+row.Error, note)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t %s\n",
			row.Stage, shapeLabel(row), row.Events, row.Seconds, row.EventsPerSec,
			num(row.RecvLogicalPerSec, "%.0f"), num(row.Ratio, "%.2f"),
			num(row.P50Ms, "%.2f"), num(row.P99Ms, "%.2f"), num(row.P999Ms, "%.2f"),
			bytesText(row.MaxSlotLag), num(row.CPUPerM, "%.1f"), num(row.RecvLogicalCPUPerM, "%.1f"),
			walSenders(row), num(row.RecordsPerRequest, "%.1f"), num(row.PeakRSSMB, "%.0f"), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if busy := r.busiest(); busy > float64(r.Machine.NumCPU) && r.Machine.NumCPU > 0 {
		fmt.Fprintf(w, "\nWARNING: the machine was busy (1-minute load average up to %.1f on %d CPUs): other work competed with the bench; the figures are not representative.\n",
			busy, r.Machine.NumCPU)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Targets:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "  %s\t%s\twant %s\tmeasured %s\n", t.Status, t.Name, t.Want, t.Measured)
	}
	return tw.Flush()
}

// busiest is the highest load average seen at the end of a measurement.
func (r *Report) busiest() float64 {
	var most float64
	for _, row := range r.Results {
		most = max(most, row.LoadAvg)
	}
	return most
}

func joinNote(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

func num(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func bytesText(v *int64) string {
	if v == nil {
		return "-"
	}
	switch b := float64(*v); {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%d B", *v)
	}
}

// Evaluate compares the results with the targets (docs/bench.md#targets). A target whose
// rows are missing (stage not run, or failed) is "n/a", never a PASS. A
// repeated drain is judged on its summary row: the medians of its runs.
func Evaluate(rows []Row) []Target {
	e := &evaluation{rows: rows}
	e.drainTargets()
	e.steadyTarget()
	e.workerTarget()
	e.exactlyOnceAndAvroTargets()
	return e.out
}

// evaluation collects the targets judged on one set of rows.
type evaluation struct {
	rows []Row
	out  []Target
}

// findMode is the first successful JSON row of the delivery mode, stage
// and shape (by prefix); of repeated runs, only their summary row counts.
func (e *evaluation) findMode(mode, stage, shapePrefix string) *Row {
	for i := range e.rows {
		r := &e.rows[i]
		if r.Runs > 1 && r.Summary == nil {
			continue // one run of several: the summary row speaks for them
		}
		if r.Mode == mode && r.ValueSchema == "" && r.Stage == stage && strings.HasPrefix(r.Shape, shapePrefix) && r.Error == "" {
			return r
		}
	}
	return nil
}

// find is findMode for at-least-once rows.
func (e *evaluation) find(stage, shapePrefix string) *Row { return e.findMode("", stage, shapePrefix) }

// check adds a target: n/a without a measurement, else PASS or MISS by ok.
func (e *evaluation) check(name, want string, v *float64, format string, ok func(float64) bool) {
	t := Target{Name: name, Want: want, Measured: "-", Status: "n/a"}
	if v != nil {
		t.Measured = fmt.Sprintf(format, *v)
		t.Status = "MISS"
		if ok(*v) {
			t.Status = "PASS"
		}
	}
	e.out = append(e.out, t)
}

// drainTargets judges each drain shape against pg_recvlogical, and its
// CPU and memory.
func (e *evaluation) drainTargets() {
	for _, shape := range []string{ShapeBulk, ShapeSingle} {
		r := e.find(StageDrain, shape)
		var ratio, cpu, rss *float64
		if r != nil {
			ratio, cpu, rss = r.Ratio, r.CPUPerM, r.PeakRSSMB
		}
		e.check("drain "+shape+": relay / pg_recvlogical", "≥ 0.80", ratio, "%.2f", func(v float64) bool { return v >= 0.8 })
		e.check("drain "+shape+": relay CPU per million events", "≤ 5 s", cpu, "%.1f s", func(v float64) bool { return v <= 5 })
		e.check("drain "+shape+": relay peak RSS", "≤ 100 MB", rss, "%.0f MB", func(v float64) bool { return v <= 100 })
	}
}

// steadyTarget judges the commit-to-ack p99 at 5,000 events/s.
func (e *evaluation) steadyTarget() {
	const steadyName, steadyWant = "steady 5,000 events/s: commit-to-ack p99", "≤ 10 ms"
	single, multi := e.find(StageSteady, "5000/s single"), e.find(StageSteady, "5000/s in ")
	switch r := single; {
	case r != nil && !r.WriterShort:
		e.check(steadyName, steadyWant, r.P99Ms, "%.2f ms", func(v float64) bool { return v <= 10 })
	case multi != nil && !multi.WriterShort:
		// Single-row transactions could not reach the rate here (they are
		// bounded by PostgreSQL's commit rate): judge it on the same event
		// rate in fewer, larger transactions, and say so.
		e.check(steadyName, steadyWant, multi.P99Ms, "%.2f ms ("+multi.Shape+")", func(v float64) bool { return v <= 10 })
	case r != nil && r.WriterShort && r.P99Ms != nil:
		// Not measured at the target rate: neither a pass nor a miss.
		e.out = append(e.out, Target{Name: steadyName, Want: steadyWant, Status: "n/a",
			Measured: fmt.Sprintf("%.2f ms, but the writer reached only %.0f events/s", *r.P99Ms, r.EventsPerSec)})
	default:
		e.check(steadyName, steadyWant, nil, "", nil)
	}
}

// workerTarget judges the worker's batch-mode apply rate.
func (e *evaluation) workerTarget() {
	var rate *float64
	if r := e.find(StageWorker, ModeBatch); r != nil {
		rate = &r.EventsPerSec
	}
	e.check("worker batch mode: apply rate", "≥ 30,000 events/s", rate, "%.0f events/s", func(v float64) bool { return v >= 30000 })
}

// exactlyOnceAndAvroTargets judges exactly-once against at-least-once and
// Avro values against JSON ones, when both sides ran.
func (e *evaluation) exactlyOnceAndAvroTargets() {
	var drainRatio, p99Ratio *float64
	if a, x := e.find(StageDrain, ShapeBulk), e.findMode(DeliveryExactlyOnce, StageDrain, ShapeBulk); a != nil && x != nil && a.EventsPerSec > 0 {
		drainRatio = f64(x.EventsPerSec / a.EventsPerSec)
	}
	if a, x := e.find(StageSteady, "1000/s single"), e.findMode(DeliveryExactlyOnce, StageSteady, "1000/s single"); a != nil && x != nil &&
		a.P99Ms != nil && x.P99Ms != nil && *a.P99Ms > 0 {
		p99Ratio = f64(*x.P99Ms / *a.P99Ms)
	}
	e.check("exactly-once drain "+ShapeBulk+": / at-least-once", "≥ 0.70", drainRatio, "%.2f", func(v float64) bool { return v >= 0.7 })
	e.check("avro drain "+ShapeBulk+": / JSON drain", "≥ 0.80", avroRatio(e.rows), "%.2f", func(v float64) bool { return v >= 0.8 })
	e.check("exactly-once steady 1,000 events/s: p99 / at-least-once p99", "≤ 2.0", p99Ratio, "%.2f", func(v float64) bool { return v <= 2 })
}

// avroRatio is the Avro values' bulk drain rate over the JSON values' on
// the same run (at-least-once), when both ran.
func avroRatio(rows []Row) *float64 {
	var json, avro *Row
	for i := range rows {
		r := &rows[i]
		if r.Stage != StageDrain || r.Mode != "" || r.Error != "" || !strings.HasPrefix(r.Shape, ShapeBulk) || (r.Runs > 1 && r.Summary == nil) {
			continue
		}
		switch {
		case r.ValueSchema == "" && json == nil:
			json = r
		case r.ValueSchema != "" && avro == nil:
			avro = r
		}
	}
	if json == nil || avro == nil || json.EventsPerSec <= 0 {
		return nil
	}
	return f64(avro.EventsPerSec / json.EventsPerSec)
}

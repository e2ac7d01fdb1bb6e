package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

//go:embed handlers.yaml
var handlersYAML []byte

// runner holds what every stage shares.
type runner struct {
	cfg          Config
	broker       *broker
	logDir       string
	recvLogical  string
	relayPprof   *pprofFlag // nil: cdc run has no --pprof flag
	workerPprof  *pprofFlag
	handlersPath string
	exactlyOnce  bool   // relays started now run with --exactly-once
	valueSchema  string // relays started now run with --value-schema
	registryURL  string // the loopback schema registry of --value-schema
}

// Run runs the selected stages, prints the table to cfg.Out, writes the JSON
// to cfg.JSONOut and returns the report. A stage that fails is recorded in
// its rows (Error) and the others still run; the returned error then says
// which failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	rep := &Report{Date: began.UTC(), Command: cfg.Command, Config: Settings{
		Stages: cfg.Stages, Modes: cfg.Modes, ValueSchema: cfg.ValueSchema, Events: cfg.Events, SteadyDuration: cfg.SteadyDuration.String(), Rates: cfg.Rates,
		WorkerEvents: cfg.WorkerEvents, WorkerSingleEvents: cfg.WorkerSingleEvents, Writers: cfg.Writers,
		StatusInterval: cfg.StatusInterval.String(),
	}}
	r, err := newRunner(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.ValueSchema != "" {
		stop := r.serveRegistry()
		defer stop()
	}
	if r.broker, err = newBroker(cfg.Brokers); err != nil {
		return nil, err
	}
	defer r.broker.close()
	rep.Machine = describeMachine(ctx, cfg.PGURL, cfg.Version)
	failed := r.runStages(ctx, rep)
	rep.Targets = Evaluate(rep.Results)
	rep.Seconds = time.Since(began).Seconds()
	return rep, r.writeReport(ctx, rep, failed)
}

// newRunner prepares a run: the log folder, pg_recvlogical for the drain
// stage, the worker's handlers file, and the profile flags of the relay and
// the worker when profiles are asked for.
func newRunner(ctx context.Context, cfg Config) (*runner, error) {
	r := &runner{cfg: cfg, logDir: filepath.Join(filepath.Dir(cfg.JSONOut), "logs")}
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	if slices.Contains(cfg.Stages, StageDrain) {
		var err error
		if r.recvLogical, err = findRecvLogical(cfg.RecvLogical); err != nil {
			return nil, err
		}
	}
	r.handlersPath = filepath.Join(r.logDir, "handlers.yaml")
	if err := os.WriteFile(r.handlersPath, handlersYAML, 0o644); err != nil {
		return nil, fmt.Errorf("write handlers file: %w", err)
	}
	if cfg.PprofDir != "" {
		if err := os.MkdirAll(cfg.PprofDir, 0o755); err != nil {
			return nil, fmt.Errorf("create profile folder: %w", err)
		}
		if f, ok := findPprofFlag(ctx, cfg.Binary, "cdc", "run"); ok {
			r.relayPprof = &f
		}
		if f, ok := findPprofFlag(ctx, cfg.Binary, "worker", "run"); ok {
			r.workerPprof = &f
		}
	}
	return r, nil
}

// runStages runs the selected stages in order, adding their rows to rep,
// until they are done or ctx ends; it returns the measurements that failed.
func (r *runner) runStages(ctx context.Context, rep *Report) []string {
	var failed []string
	for _, stage := range r.cfg.Stages {
		r.cfg.Log.Info("stage starting", "stage", stage)
		rows := r.stage(ctx, stage)
		for _, row := range rows {
			r.cfg.Log.Info("measured", "stage", row.Stage, "shape", row.Shape, "events", row.Events,
				"events_per_sec", int64(row.EventsPerSec), "error", row.Error)
			if row.Error != "" {
				failed = append(failed, row.Stage+" "+row.Shape)
			}
		}
		rep.Results = append(rep.Results, rows...)
		if ctx.Err() != nil {
			break
		}
	}
	return failed
}

// stage runs one stage and returns its rows.
func (r *runner) stage(ctx context.Context, stage string) []Row {
	switch stage {
	case StageDrain:
		return r.inValueSchemas(ctx, func(ctx context.Context) []Row { return r.inModes(ctx, r.drain) })
	case StageSteady:
		return r.steadyRounds(ctx)
	case StageWorker:
		return r.worker(ctx)
	case StageKafka:
		return r.inModes(ctx, r.kafkaStage)
	}
	return nil
}

// writeReport prints the table and writes the JSON; its error says why the
// run is not a success: the report could not be written, ctx ended, or
// measurements failed.
func (r *runner) writeReport(ctx context.Context, rep *Report, failed []string) error {
	if err := rep.WriteTable(r.cfg.Out); err != nil {
		return err
	}
	if err := rep.WriteJSON(r.cfg.JSONOut); err != nil {
		return err
	}
	fmt.Fprintf(r.cfg.Out, "\nJSON: %s   logs: %s\n", r.cfg.JSONOut, r.logDir)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench: %d measurement(s) failed: %v", len(failed), failed)
	}
	return nil
}

// measure fills row with fn, then notes fn's error and the machine's load
// in it.
func measure(row Row, fn func(*Row) error) Row {
	if err := fn(&row); err != nil {
		row.Error = errText(err)
	}
	row.LoadAvg = loadAverage()
	return row
}

// inModes runs a relay stage once per delivery mode; the rows of the
// exactly-once run carry the mode in Mode and in their shape.
func (r *runner) inModes(ctx context.Context, stage func(context.Context) []Row) []Row {
	var rows []Row
	for _, mode := range r.cfg.Modes {
		r.exactlyOnce = mode == DeliveryExactlyOnce
		got := stage(ctx)
		if r.exactlyOnce {
			for i := range got {
				got[i].Mode = mode
				got[i].Shape += ", " + mode
			}
		}
		rows = append(rows, got...)
		if ctx.Err() != nil {
			break
		}
	}
	r.exactlyOnce = false
	return rows
}

// profiling starts a CPU profile of p while it works, when profiles are
// asked for; the returned function waits for it and says where it went (or
// why there is none).
func (r *runner) profiling(ctx context.Context, p *proc, addr, name string) func() (string, string) {
	if r.cfg.PprofDir == "" {
		return func() (string, string) { return "", "" }
	}
	path := filepath.Join(r.cfg.PprofDir, name+".cpu.pprof")
	done := make(chan error, 1)
	go func() {
		// The process may not listen yet: wait for its HTTP server first.
		err := poll(ctx, 30*time.Second, 20*time.Millisecond, p.name+" serving HTTP", func() (bool, error) {
			_, code, err := p.get(ctx, "/healthz")
			return err == nil && code > 0, p.exitedErr()
		})
		if err == nil {
			err = p.cpuProfile(ctx, addr, 20, path)
		}
		done <- err
	}()
	return func() (string, string) {
		if err := <-done; err != nil {
			return "", "no profile: " + err.Error()
		}
		return path, ""
	}
}

// pprofArgs are the flags that make cmd serve /debug/pprof and the address
// to fetch profiles from ("" = the metrics address).
func pprofArgs(f *pprofFlag) ([]string, string) {
	if f == nil {
		return nil, ""
	}
	args, addr, err := f.args()
	if err != nil {
		return nil, ""
	}
	return args, addr
}

// errText is err's message for a row, or "".
func errText(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	return err.Error()
}

package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// drainWriters is how many connections write the backlog.
const drainWriters = 4

// produceRequests is the relay's count of produce requests sent to Kafka.
const produceRequests = "eventforge_cdc_produce_requests_total"

// drainTimeout bounds each reader of a backlog.
const drainTimeout = time.Hour

// drain measures the selected backlog shapes, each --repeat times; a
// repeated shape ends with the summary row of its runs.
func (r *runner) drain(ctx context.Context) []Row {
	var rows []Row
	for _, name := range r.cfg.Shapes {
		shape, err := shapeNamed(name)
		if err != nil { // Validate checked the names
			continue
		}
		runs := r.drainRuns(ctx, shape)
		if len(runs) > 1 {
			runs = append(runs, summarize(runs)) // flags the outliers in runs first
		}
		rows = append(rows, runs...)
		if ctx.Err() != nil {
			break
		}
	}
	return rows
}

// drainRuns measures shape --repeat times, each on a fresh database.
func (r *runner) drainRuns(ctx context.Context, shape backlogShape) []Row {
	n := max(r.cfg.Repeat, 1)
	var runs []Row
	for i := 1; i <= n; i++ {
		if n > 1 {
			r.cfg.Log.Info("drain run", "shape", shape.Name, "run", i, "of", n)
		}
		row := Row{Stage: StageDrain, Shape: shape.Name, Events: int64(r.cfg.Events)}
		if n > 1 {
			row.Run, row.Runs = i, n
		}
		runs = append(runs, measure(row, func(row *Row) error { return r.drainInto(ctx, shape, row) }))
		if ctx.Err() != nil {
			break
		}
	}
	return runs
}

// drainInto writes the backlog with no reader running, then reads the same
// WAL with pg_recvlogical and with the relay, each from its own slot created
// before the writes, and compares the rates.
func (r *runner) drainInto(ctx context.Context, shape backlogShape, row *Row) error {
	log := r.cfg.Log.With("stage", StageDrain, "shape", shape.Name)
	db, err := newDatabase(ctx, r.cfg.PGURL)
	if err != nil {
		return err
	}
	defer db.drop()
	tag := uniqueName("d")
	recvSlot, relaySlot := tag+"_recv", tag+"_relay"
	for _, s := range []string{recvSlot, relaySlot} {
		if err := db.createSlot(ctx, s); err != nil {
			return err
		}
	}
	end, err := r.writeDrainBacklog(ctx, log, db, shape, tag, row)
	if err != nil {
		return err
	}
	if err := r.drainWithRecvLogical(ctx, log, db, recvSlot, end, row); err != nil {
		return err
	}
	return r.drainWithRelay(ctx, log, db, relaySlot, tag+".", shape, end, row)
}

// writeDrainBacklog writes the backlog with no reader running and returns
// the LSN that ends it.
func (r *runner) writeDrainBacklog(ctx context.Context, log *slog.Logger, db *database, shape backlogShape, tag string, row *Row) (pglogrepl.LSN, error) {
	pool, err := db.writerPool(ctx, drainWriters, true)
	if err != nil {
		return 0, err
	}
	log.Info("writing backlog", "events", r.cfg.Events, "database", db.name)
	wrote := time.Now()
	err = writeBacklog(ctx, pool, shape, r.cfg.Events, drainWriters, tag)
	pool.Close()
	if err != nil {
		return 0, err
	}
	writeSecs := time.Since(wrote).Seconds()
	end, err := db.endMarker(ctx)
	if err != nil {
		return 0, err
	}
	row.EndLSN = end.String()
	row.Note = fmt.Sprintf("backlog written in %.1f s", writeSecs)
	return end, nil
}

// drainWithRecvLogical reads the backlog with pg_recvlogical, PostgreSQL's
// own client, and records its rate and CPU, and its WAL sender's, in row.
func (r *runner) drainWithRecvLogical(ctx context.Context, log *slog.Logger, db *database, slot string, end pglogrepl.LSN, row *Row) error {
	log.Info("draining with pg_recvlogical", "end_lsn", end)
	wctx, stopWatch := context.WithCancel(ctx)
	recvWalSender := db.watchWalSender(wctx, slot, 100*time.Millisecond)
	recvSecs, recvCPU, err := r.recvLogicalDrain(ctx, db.url, slot, end.String())
	stopWatch()
	if err != nil {
		return err
	}
	if cpu, ok := recvWalSender(); ok {
		row.RecvLogicalWalSenderCPUPerM = f64(cpu / float64(r.cfg.Events) * 1e6)
	}
	row.RecvLogicalRan = true
	row.RecvLogicalSeconds = f64(recvSecs)
	row.RecvLogicalPerSec = f64(float64(r.cfg.Events) / recvSecs)
	row.RecvLogicalCPUPerM = f64(recvCPU / float64(r.cfg.Events) * 1e6)
	return nil
}

// drainWithRelay reads the same backlog with the relay until its slot is
// confirmed at end, and records its rate, its resources, the records in
// Kafka and its ratio to pg_recvlogical in row.
func (r *runner) drainWithRelay(ctx context.Context, log *slog.Logger, db *database, slot, prefix string, shape backlogShape, end pglogrepl.LSN, row *Row) error {
	if err := r.broker.createTopic(ctx, prefix+"orders"); err != nil {
		return err
	}
	log.Info("draining with the relay")
	p, profAddr, err := r.startRelay(db.url, slot, prefix, "drain-"+strings.ReplaceAll(shape.Name, " ", "-")+runSuffix(row))
	if err != nil {
		return err
	}
	defer p.stop(time.Minute) //nolint:errcheck // stopped explicitly below; this only covers early returns
	profile := r.profiling(ctx, p, profAddr, "relay-drain-"+fmt.Sprint(shape.RowsPerTxn)+runSuffix(row))
	if err := db.waitConfirmed(ctx, slot, end, drainTimeout, p.exitedErr); err != nil {
		return err
	}
	secs := time.Since(p.started).Seconds()
	u, err := p.usage()
	if err != nil {
		return err
	}
	if cpu, ok := db.walSenderCPU(ctx, slot); ok {
		row.WalSenderCPUPerM = f64(cpu / float64(r.cfg.Events) * 1e6)
	}
	row.SlotReachedEnd = true
	if c, err := db.confirmed(ctx, slot); err == nil {
		row.ConfirmedLSN = c.String()
	}
	row.Seconds = secs
	row.EventsPerSec = float64(r.cfg.Events) / secs
	row.Ratio = f64(row.EventsPerSec / *row.RecvLogicalPerSec)
	r.setUsage(row, u, int64(r.cfg.Events))
	r.setRequests(ctx, p, row)
	n, err := r.drainedRecords(ctx, prefix+"orders")
	if err != nil {
		return err
	}
	row.KafkaRecords = i64(n)
	path, note := profile()
	row.Profile = path
	row.Note = joinNote(row.Note, note)
	if err := p.stop(time.Minute); err != nil {
		return fmt.Errorf("stop relay: %w", err)
	}
	if n < int64(r.cfg.Events) {
		return fmt.Errorf("%d records in Kafka, want at least %d", n, r.cfg.Events)
	}
	return nil
}

// drainedRecords counts the records of topic: in exactly-once mode only
// those of committed transactions.
func (r *runner) drainedRecords(ctx context.Context, topic string) (int64, error) {
	if r.exactlyOnce {
		return r.broker.committedRecords(ctx, topic)
	}
	return r.broker.records(ctx, topic)
}

// recvLogicalDrain runs pg_recvlogical from slot to end (pgoutput, output to
// /dev/null) and returns its wall time and CPU (user + system) seconds.
func (r *runner) recvLogicalDrain(ctx context.Context, url, slot, end string) (secs, cpu float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.recvLogical, "-d", url, "--start", "-S", slot, "-P", "pgoutput",
		"-o", "proto_version=1", "-o", "publication_names="+publication, "-o", "messages=true",
		"--endpos="+end, "--no-loop", "-f", "/dev/null")
	began := time.Now()
	out, err := cmd.CombinedOutput()
	secs = time.Since(began).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("pg_recvlogical: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return secs, childCPU(cmd.ProcessState), nil
}

// runSuffix tells the logs and profiles of the runs of a repeated drain apart.
func runSuffix(row *Row) string {
	if row.Runs > 1 {
		return fmt.Sprintf("-run%d", row.Run)
	}
	return ""
}

// setRequests reads the relay's produce requests from its /metrics and
// fills the records per request. A relay without the counter leaves both
// empty.
func (r *runner) setRequests(ctx context.Context, p *proc, row *Row) {
	b, err := p.metrics(ctx)
	if err != nil {
		return
	}
	n, err := SumCounter(bytes.NewReader(b), produceRequests, nil)
	if err != nil || n <= 0 {
		return
	}
	row.ProduceRequests = i64(int64(n))
	row.RecordsPerRequest = f64(float64(row.Events) / n)
}

// startRelay runs `eventforge cdc run` on slot with topics behind prefix.
func (r *runner) startRelay(url, slot, prefix, name string) (*proc, string, error) {
	args := []string{"cdc", "run", "--pg-url", url, "--kafka-brokers", strings.Join(r.cfg.Brokers, ","),
		"--slot", slot, "--topic-prefix", prefix, "--status-interval", r.cfg.StatusInterval.String()}
	if r.exactlyOnce {
		args = append(args, "--exactly-once")
		name += "-eos"
	}
	if r.valueSchema != "" {
		args = append(args, "--value-schema", r.valueSchema, "--schema-registry-url", r.registryURL, "--subject-name-strategy", "record")
		name += "-" + r.valueSchema
	}
	extra, profAddr := pprofArgs(r.relayPprof)
	p, err := startProc(r.cfg.Binary, "relay-"+name, r.logDir, append(args, extra...)...)
	return p, profAddr, err
}

// setUsage fills the CPU and memory columns for events handled.
func (r *runner) setUsage(row *Row, u usage, events int64) {
	row.CPUSeconds = f64(u.CPUSeconds)
	if events > 0 {
		row.CPUPerM = f64(u.CPUSeconds / float64(events) * 1e6)
	}
	row.PeakRSSMB = f64(float64(u.PeakRSS) / (1 << 20))
}

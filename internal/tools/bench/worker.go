package bench

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// applyTimeout bounds one worker measurement.
const applyTimeout = time.Hour

// worker measures the apply rate in batch mode and one by one.
func (r *runner) worker(ctx context.Context) []Row {
	var rows []Row
	for _, m := range []struct {
		mode         string
		events, size int
	}{{ModeBatch, r.cfg.WorkerEvents, 0}, {ModeSingle, r.cfg.WorkerSingleEvents, 1}} {
		row := Row{Stage: StageWorker, Shape: m.mode, Events: int64(m.events)}
		rows = append(rows, measure(row, func(row *Row) error { return r.workerMode(ctx, m.mode, m.events, m.size, row) }))
		if ctx.Err() != nil {
			break
		}
	}
	return rows
}

// workerMode pre-fills a fresh topic with n events for n existing orders,
// then runs `eventforge worker run` with a fresh group and times it from
// joining the group until every event is applied.
func (r *runner) workerMode(ctx context.Context, mode string, n, batchSize int, row *Row) error {
	db, err := newDatabase(ctx, r.cfg.PGURL)
	if err != nil {
		return err
	}
	defer db.drop()
	tag := uniqueName("w")
	topic, err := r.fillWorkerInput(ctx, db, mode, tag, n, row)
	if err != nil {
		return err
	}
	args := []string{"worker", "run", "--pg-url", db.url, "--kafka-brokers", strings.Join(r.cfg.Brokers, ","),
		"--group", tag, "--topics", topic, "--handlers", r.handlersPath}
	if batchSize > 0 { // 0: the worker's default batch size
		args = append(args, "--batch-size", strconv.Itoa(batchSize))
	}
	extra, profAddr := pprofArgs(r.workerPprof)
	p, err := startProc(r.cfg.Binary, "worker-"+mode, r.logDir, append(args, extra...)...)
	if err != nil {
		return err
	}
	defer p.stop(time.Minute) //nolint:errcheck // stopped explicitly below; this only covers early returns
	if err := p.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	ready := time.Now()
	profile := r.profiling(ctx, p, profAddr, "worker-"+mode)
	if err := waitApplied(ctx, p, n); err != nil {
		return err
	}
	secs := time.Since(ready).Seconds()
	u, err := p.usage()
	if err != nil {
		return err
	}
	row.Seconds = secs
	row.EventsPerSec = float64(n) / secs
	r.setUsage(row, u, int64(n))
	row.Note = joinNote(row.Note, fmt.Sprintf("joined the group %.1f s after start", ready.Sub(p.started).Seconds()))
	path, note := profile()
	row.Profile = path
	row.Note = joinNote(row.Note, note)
	if err := p.stop(time.Minute); err != nil {
		return fmt.Errorf("stop worker: %w", err)
	}
	return checkApplied(ctx, db, tag, n, row)
}

// fillWorkerInput inserts n orders into the fresh database and pre-fills a
// fresh topic with one event for each; it returns the topic.
func (r *runner) fillWorkerInput(ctx context.Context, db *database, mode, tag string, n int, row *Row) (string, error) {
	if _, err := db.pool.Exec(ctx, `INSERT INTO orders (id, status, customer, amount, currency)
		SELECT 'o-' || $2::text || '-' || g, 'created', 'c' || (g % 97), g % 10000 + 1, 'EUR'
		FROM generate_series(1, $1::bigint) AS g`, n, tag); err != nil {
		return "", fmt.Errorf("insert orders: %w", err)
	}
	topic := tag + ".orders"
	if err := r.broker.createTopic(ctx, topic); err != nil {
		return "", err
	}
	r.cfg.Log.Info("pre-filling topic", "stage", StageWorker, "mode", mode, "topic", topic, "events", n)
	filled := time.Now()
	if err := r.broker.prefill(ctx, topic, tag, n); err != nil {
		return "", err
	}
	row.Note = fmt.Sprintf("topic filled in %.1f s", time.Since(filled).Seconds())
	return topic, nil
}

// waitApplied polls the worker's metrics until n events are applied; an
// event dead-lettered or the worker exiting ends the wait with an error.
func waitApplied(ctx context.Context, p *proc, n int) error {
	return poll(ctx, applyTimeout, 100*time.Millisecond, fmt.Sprintf("%d events applied", n), func() (bool, error) {
		if err := p.exitedErr(); err != nil {
			return false, err
		}
		b, err := p.metrics(ctx)
		if err != nil {
			return false, nil
		}
		if dlq, _ := SumCounter(bytes.NewReader(b), "eventforge_worker_events_total", map[string]string{"result": "dlq"}); dlq > 0 {
			return false, fmt.Errorf("%.0f events dead-lettered (see %s)", dlq, p.logPath)
		}
		applied, err := SumCounter(bytes.NewReader(b), "eventforge_worker_events_total", map[string]string{"result": "applied"})
		return applied >= float64(n), err
	})
}

// checkApplied counts the inbox rows of the group and the processed
// orders: both must be n.
func checkApplied(ctx context.Context, db *database, tag string, n int, row *Row) error {
	var inbox, processed int64
	if err := db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM processed_events WHERE consumer = $1),
		(SELECT count(*) FROM orders WHERE status = 'processed')`, tag).Scan(&inbox, &processed); err != nil {
		return fmt.Errorf("count applied events: %w", err)
	}
	row.Applied = i64(inbox)
	if inbox != int64(n) || processed != int64(n) {
		return fmt.Errorf("%d inbox rows and %d processed orders, want %d each", inbox, processed, n)
	}
	return nil
}

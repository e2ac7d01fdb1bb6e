package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// commitToAck is the relay's latency histogram (the contract's name).
const commitToAck = "eventforge_cdc_commit_to_ack_seconds"

// commitToReceive is the server's share of commitToAck: commit timestamp to
// the relay's receipt of the transaction's Begin.
const commitToReceive = "eventforge_cdc_commit_to_receive_seconds"

// catchUpTimeout bounds the wait for the relay to confirm a stage's writes.
const catchUpTimeout = 10 * time.Minute

// steady runs every rate against one relay that is running and caught up.
func (r *runner) steady(ctx context.Context) []Row {
	var rows []Row
	fail := func(err error) []Row {
		return append(rows, Row{Stage: StageSteady, Shape: "setup", Error: errText(err)})
	}
	db, err := newDatabase(ctx, r.cfg.PGURL)
	if err != nil {
		return fail(err)
	}
	defer db.drop()
	tag := uniqueName("s")
	slot, prefix := tag+"_relay", tag+"."
	if err := r.broker.createTopic(ctx, prefix+"orders"); err != nil {
		return fail(err)
	}
	p, _, err := r.startRelay(db.url, slot, prefix, "steady")
	if err != nil {
		return fail(err)
	}
	defer p.stop(time.Minute) //nolint:errcheck // best effort on the way out
	if err := p.waitReady(ctx, 2*time.Minute); err != nil {
		return fail(err)
	}
	pool, err := db.writerPool(ctx, r.cfg.Writers, false)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	// One event through first: the topic's metadata and the producer warm.
	if err := steadyTxn(pool, Rate{EventsPerSec: 1, RowsPerTxn: 1}, tag+"w")(ctx, 0); err != nil {
		return fail(fmt.Errorf("write first event: %w", err))
	}
	if err := r.catchUp(ctx, db, slot, p); err != nil {
		return fail(err)
	}
	for i, rate := range r.cfg.Rates {
		row := Row{Stage: StageSteady, Shape: steadyShape(rate)}
		rows = append(rows, measure(row, func(row *Row) error {
			return r.steadyRate(ctx, db, pool, p, slot, rate, fmt.Sprintf("%s%d", tag, i), row)
		}))
		if ctx.Err() != nil || p.exitedErr() != nil {
			break
		}
	}
	if err := p.stop(time.Minute); err != nil && len(rows) > 0 {
		rows[len(rows)-1].Error = joinNote(rows[len(rows)-1].Error, "stop relay: "+err.Error())
	}
	return rows
}

func steadyShape(r Rate) string {
	if r.RowsPerTxn == 1 {
		return fmt.Sprintf("%d/s single-row txns", r.EventsPerSec)
	}
	return fmt.Sprintf("%d/s in %d-row txns", r.EventsPerSec, r.RowsPerTxn)
}

// catchUp waits until the slot is confirmed at the current WAL position.
func (r *runner) catchUp(ctx context.Context, db *database, slot string, p *proc) error {
	end, err := db.currentLSN(ctx)
	if err != nil {
		return err
	}
	return db.waitConfirmed(ctx, slot, end, catchUpTimeout, p.exitedErr)
}

// steadyRate runs the open-loop writer at rate for the configured duration
// and reads the latency from the relay's histogram deltas.
func (r *runner) steadyRate(ctx context.Context, db *database, pool *pgxpool.Pool, p *proc, slot string, rate Rate, tag string, row *Row) error {
	log := r.cfg.Log.With("stage", StageSteady, "rate", rate.String())
	resetPeak(p.cmd.Process.Pid)
	u0, err := p.usage()
	if err != nil {
		return err
	}
	h0, err := p.histogram(ctx, commitToAck)
	if err != nil {
		return err
	}
	s0, serr := p.histogram(ctx, commitToReceive) // optional: older relays lack it
	lagCtx, stopLag := context.WithCancel(ctx)
	maxLag := watchLag(lagCtx, db, slot)

	log.Info("writing", "duration", r.cfg.SteadyDuration, "writers", r.cfg.Writers)
	res := runOpenLoop(ctx, newSchedule(rate.TxnPerSec(), r.cfg.SteadyDuration), r.cfg.Writers, steadyTxn(pool, rate, tag))
	caught := r.catchUp(ctx, db, slot, p)
	stopLag()
	lag := <-maxLag
	if caught != nil {
		return caught
	}
	events := res.Done * int64(rate.RowsPerTxn)
	// The relay records the latency right after it acks, so the last
	// samples may trail the slot's confirmation by a moment.
	var h1 Histogram
	err = poll(ctx, 5*time.Second, 20*time.Millisecond, "latency samples", func() (bool, error) {
		var err error
		h1, err = p.histogram(ctx, commitToAck)
		return err == nil && int64(h1.Sub(h0).total()) >= events, err
	})
	if err != nil && h1.Bounds == nil {
		return err
	}
	u1, err := p.usage()
	if err != nil {
		return err
	}
	if s1, err := p.histogram(ctx, commitToReceive); serr == nil && err == nil {
		sd := s1.Sub(s0)
		row.server = sd
		row.ServerP50Ms, row.ServerP99Ms = f64(1000*sd.Quantile(0.5)), f64(1000*sd.Quantile(0.99))
	}

	row.Events = events
	row.Seconds = r.cfg.SteadyDuration.Seconds()
	row.EventsPerSec = float64(events) / row.Seconds
	row.TargetPerSec = f64(float64(rate.EventsPerSec))
	row.WriterShort = short(row.EventsPerSec, float64(rate.EventsPerSec))
	d := h1.Sub(h0)
	row.latency = d
	row.P50Ms, row.P99Ms, row.P999Ms = f64(1000*d.Quantile(0.5)), f64(1000*d.Quantile(0.99)), f64(1000*d.Quantile(0.999))
	row.LatencyCount = i64(int64(d.total()))
	row.MaxSlotLag = i64(lag)
	r.setUsage(row, usage{CPUSeconds: u1.CPUSeconds - u0.CPUSeconds, PeakRSS: u1.PeakRSS}, events)
	row.WriterP50Ms, row.WriterP99Ms = f64(ms(res.commitQuantile(0.5))), f64(ms(res.commitQuantile(0.99)))
	row.Note = fmt.Sprintf("writer: %d of %d txns, %d dropped, %d failed, max start delay %s, commit p50/p99 %.1f/%.1f ms",
		res.Done, res.Scheduled, res.Dropped, res.Errors, res.MaxBehind.Round(time.Millisecond),
		ms(res.commitQuantile(0.5)), ms(res.commitQuantile(0.99)))
	if row.ServerP99Ms != nil {
		row.Note += fmt.Sprintf("; server share (commit to receipt) p50/p99 %.1f/%.1f ms", *row.ServerP50Ms, *row.ServerP99Ms)
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d transactions failed", res.Errors)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// watchLag polls the slot's lag every 100 ms until ctx ends, then sends the
// largest value seen.
func watchLag(ctx context.Context, db *database, slot string) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var most int64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if lag, err := db.slotLag(ctx, slot); err == nil && lag > most {
				most = lag
			}
			select {
			case <-ctx.Done():
				out <- most
				return
			case <-t.C:
			}
		}
	}()
	return out
}

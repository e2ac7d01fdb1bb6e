package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Rate is one steady-state load: EventsPerSec events per second in
// transactions of RowsPerTxn outbox rows. RowsPerTxn 1 means single-row
// transactions that also insert an orders row, as a service would.
type Rate struct {
	EventsPerSec int `json:"events_per_sec"`
	RowsPerTxn   int `json:"rows_per_txn"`
}

// TxnPerSec is the transaction rate the writer schedules.
func (r Rate) TxnPerSec() float64 { return float64(r.EventsPerSec) / float64(r.RowsPerTxn) }

// String is the flag syntax: EVENTS or EVENTS/ROWS.
func (r Rate) String() string {
	if r.RowsPerTxn == 1 {
		return strconv.Itoa(r.EventsPerSec)
	}
	return fmt.Sprintf("%d/%d", r.EventsPerSec, r.RowsPerTxn)
}

// ParseRates reads a comma-separated list of EVENTS[/ROWS]: "5000" is 5,000
// single-row transactions per second, "50000/100" is 50,000 events per second
// in 100-row transactions.
func ParseRates(s string) ([]Rate, error) {
	var out []Rate
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ev, rows, hasRows := strings.Cut(item, "/")
		r := Rate{RowsPerTxn: 1}
		var err error
		if r.EventsPerSec, err = strconv.Atoi(ev); err != nil || r.EventsPerSec <= 0 {
			return nil, fmt.Errorf("rate %q: events per second must be a positive integer", item)
		}
		if hasRows {
			if r.RowsPerTxn, err = strconv.Atoi(rows); err != nil || r.RowsPerTxn <= 0 {
				return nil, fmt.Errorf("rate %q: rows per transaction must be a positive integer", item)
			}
		}
		if r.RowsPerTxn > r.EventsPerSec {
			return nil, fmt.Errorf("rate %q: fewer than one transaction per second", item)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no rates in %q", s)
	}
	return out, nil
}

// schedule is the open-loop clock: transaction i is due at i/txnPerSec after
// the start, whether or not transaction i-1 has finished.
type schedule struct {
	txnPerSec float64
	total     int64 // transactions in the whole run
}

func newSchedule(txnPerSec float64, d time.Duration) schedule {
	return schedule{txnPerSec: txnPerSec, total: int64(txnPerSec * d.Seconds())}
}

// dueBy is how many transactions are due once elapsed has passed (the one at
// time 0 included), capped at the run's total.
func (s schedule) dueBy(elapsed time.Duration) int64 {
	if elapsed < 0 {
		return 0
	}
	n := int64(elapsed.Seconds()*s.txnPerSec) + 1
	return min(n, s.total)
}

// at is when transaction i (0-based) is due, relative to the start.
func (s schedule) at(i int64) time.Duration {
	return time.Duration(float64(i) / s.txnPerSec * float64(time.Second))
}

// openLoopResult is what the writer did.
type openLoopResult struct {
	Scheduled int64           // transactions due in the window
	Done      int64           // transactions committed
	Dropped   int64           // due but not started before the window closed
	Errors    int64           // transactions that failed
	Elapsed   time.Duration   // from the start to the last commit
	MaxBehind time.Duration   // largest delay between a due time and its start
	Commits   []time.Duration // duration of each committed transaction, as the client saw it
}

// commitQuantile is the q-quantile of the writer's transaction durations
// (nearest rank); zero without transactions. It sorts Commits.
func (r openLoopResult) commitQuantile(q float64) time.Duration {
	slices.Sort(r.Commits)
	return nearestRank(r.Commits, q)
}

// nearestRank is the q-quantile of sorted durations (nearest rank); zero
// when there are none.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runOpenLoop calls txn for every transaction of s from conns goroutines,
// starting each at its due time (or as soon as a goroutine is free when the
// writer is behind). Transactions still waiting when the window closes are
// dropped, so a writer that cannot keep up shows as a shortfall, not as a
// longer run.
func runOpenLoop(ctx context.Context, s schedule, conns int, txn func(ctx context.Context, i int64) error) openLoopResult {
	var res openLoopResult
	res.Scheduled = s.total
	jobs := make(chan int64, 1<<16)
	var done, errs atomic.Int64
	var maxBehind atomic.Int64
	var lastCommit atomic.Int64
	var mu sync.Mutex
	commits := make([]time.Duration, 0, min(s.total, 1<<20))
	start := time.Now()
	window := s.at(s.total)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				now := time.Since(start)
				if now > window+time.Second {
					continue // past the window (and a second of grace): counted as dropped
				}
				late := now - s.at(i)
				for old := maxBehind.Load(); int64(late) > old && !maxBehind.CompareAndSwap(old, int64(late)); old = maxBehind.Load() {
				}
				began := time.Now()
				if err := txn(ctx, i); err != nil {
					if ctx.Err() != nil {
						return
					}
					errs.Add(1)
					continue
				}
				took := time.Since(began)
				done.Add(1)
				lastCommit.Store(int64(time.Since(start)))
				mu.Lock()
				commits = append(commits, took)
				mu.Unlock()
			}
		}()
	}
	tick := time.NewTicker(time.Millisecond)
	var sent int64
	for sent < s.total && ctx.Err() == nil {
		due := s.dueBy(time.Since(start))
		for ; sent < due; sent++ {
			jobs <- sent
		}
		if sent < s.total {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	res.Done, res.Errors = done.Load(), errs.Load()
	res.Dropped = res.Scheduled - res.Done - res.Errors
	res.Elapsed = time.Duration(lastCommit.Load())
	res.MaxBehind = time.Duration(maxBehind.Load())
	res.Commits = commits
	return res
}

// achieved is the committed rate over the scheduled window.
func (r openLoopResult) achieved(window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return float64(r.Done) / window.Seconds()
}

// short reports whether the achieved rate fell more than 5% below target.
func short(achieved, target float64) bool { return achieved < 0.95*target }

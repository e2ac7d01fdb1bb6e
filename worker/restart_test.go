package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestRunnerSurvivesPostgresRestart: an immediate (crash) restart of
// PostgreSQL mid-stream is waited out. No event is dead-lettered although
// MaxAttempts is 2 (a lost connection is not the event's fault and spends
// no attempt), and every event is applied exactly once.
func TestRunnerSurvivesPostgresRestart(t *testing.T) {
	t.Parallel()
	const n = 3000
	began := time.Now()
	env := testenv.Shared(t)
	pg := testenv.StartPostgres(t)
	t.Logf("private PostgreSQL up after %s", time.Since(began).Round(time.Millisecond))
	f := fixtureOn(t, env, pg.URL(), env.Brokers)
	pool := f.pool
	createTopic(t, f.brokers, f.topic, 3)

	ids := make([]string, n)
	evs := make([]*outbox.Event, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%05d", i)
		evs[i] = f.orderEvent(ids[i])
	}
	f.insertOrders(t, ids...)
	produce(t, f.brokers, evs...)

	cfg := f.config()
	cfg.MaxAttempts = 2
	cfg.BatchSize = 1
	r := start(t, cfg, pool, counting)
	waitFor(t, 60*time.Second, "a tenth of the events applied", func() bool { return r.events(f.topic, resultApplied) >= n/10 })
	t.Logf("restarting PostgreSQL after %s", time.Since(began).Round(time.Millisecond))
	pg.Restart(t, true)
	t.Logf("PostgreSQL back after %s", time.Since(began).Round(time.Millisecond))
	waitFor(t, 120*time.Second, "every event handled", func() bool {
		return r.events(f.topic, resultApplied)+r.events(f.topic, resultDuplicate)+r.events(f.topic, resultDLQ) >= n
	})
	if d := r.events(f.topic, resultDLQ); d != 0 {
		t.Errorf("%d events dead-lettered during the restart", d)
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != n {
		t.Errorf("%d of %d orders applied exactly once", got, n)
	}
	if got := f.count(t, `SELECT count(*) FROM processed_events`); got != n {
		t.Errorf("%d inbox rows, want %d", got, n)
	}
	t.Logf("applied %d, duplicates %d, retries %v", r.events(f.topic, resultApplied), r.events(f.topic, resultDuplicate),
		r.metric("eventforge_worker_retries_total"))
}

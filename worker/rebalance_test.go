package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker"
)

// slowHandler applies with h after a pause and tells whether a call is
// running, so a test can act while a batch is half done.
type slowHandler struct {
	h      worker.Handler
	pause  time.Duration
	inside atomic.Int32
}

func (s *slowHandler) Apply(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
	s.inside.Add(1)
	defer s.inside.Add(-1)
	select {
	case <-time.After(s.pause):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.h.Apply(ctx, tx, ev)
}

// highWatermarks is the next offset of every partition of topic.
func highWatermarks(t testing.TB, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	cl, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ps, err := cl.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range ps {
		if out[p], err = cl.GetOffset(topic, p, sarama.OffsetNewest); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRebalanceDuringBatch: a second worker joins the group while the first
// is in the middle of a batch (slow handler, 50 events per transaction).
// The rebalance revokes partitions under the running batch; afterwards every
// event took effect exactly once, both workers applied some, and the group's
// committed offsets end at each partition's high watermark (docs/design.md#inbox, #offsets-forward).
func TestRebalanceDuringBatch(t *testing.T) {
	t.Parallel()
	// Six partitions of 200 events, batches of 50 at 100 ms per event: each
	// batch takes 5 s, so about 15 s of work remain when B joins after the
	// first batches, longer than a rebalance takes even on a loaded machine.
	const n = 1200
	f := newFixture(t, 6)
	ids := make([]string, n)
	evs := make([]*outbox.Event, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%04d", i)
		evs[i] = f.orderEvent(ids[i])
	}
	f.insertOrders(t, ids...)
	produce(t, f.brokers, evs...)
	h := sqlCounting(t, f)
	processed := func() int { return f.count(t, `SELECT count(*) FROM processed_events`) }

	cfg := f.config()
	cfg.BatchSize = 50
	ha := &slowHandler{h: h, pause: 100 * time.Millisecond}
	a := start(t, cfg, f.pool, ha)
	waitFor(t, 60*time.Second, "the first batch applied", func() bool { return processed() >= 50 })
	waitFor(t, 10*time.Second, "worker A inside a batch", func() bool { return ha.inside.Load() > 0 })
	atJoin := processed()
	hb := &slowHandler{h: h, pause: 100 * time.Millisecond}
	b := start(t, cfg, f.pool, hb)
	if atJoin >= n-50 {
		t.Fatalf("%d of %d applied before the second worker joined: the test proves nothing", atJoin, n)
	}

	waitFor(t, 120*time.Second, "every event applied", func() bool { return processed() == n })
	hw := highWatermarks(t, f.brokers, f.topic)
	waitFor(t, 30*time.Second, "offsets committed to the high watermarks", func() bool {
		for p, want := range hw {
			if committed(t, f.brokers, f.group, f.topic, p) != want {
				return false
			}
		}
		return true
	})
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1 AND status = 'processed'`); got != n {
		t.Errorf("%d of %d orders applied exactly once", got, n)
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount <> 1`); got != 0 {
		t.Errorf("%d orders applied zero or several times", got)
	}
	appliedA, appliedB := a.events(f.topic, resultApplied), b.events(f.topic, resultApplied)
	if appliedA == 0 || appliedB == 0 {
		t.Errorf("applied by A %d, by B %d: the partitions did not move", appliedA, appliedB)
	}
	t.Logf("B joined with %d of %d applied; applied A=%d B=%d, duplicates seen A=%d B=%d",
		atJoin, n, appliedA, appliedB, a.events(f.topic, resultDuplicate), b.events(f.topic, resultDuplicate))
	for name, r := range map[string]*running{"A": a, "B": b} {
		if err := r.stop(); err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
	}
}

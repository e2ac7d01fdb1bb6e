package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"golang.org/x/sync/errgroup"
)

// Runner consumes its topics as a member of a consumer group and applies
// each event with the inbox pattern (see ApplyOnce), one goroutine per
// claimed partition, in offset order. An offset is marked only after its
// event's transaction committed or its dead letter was acked, and marked
// offsets are committed to Kafka every CommitInterval and when a session
// ends. Crashes therefore redeliver, never skip, and the inbox drops what
// was already applied.
type Runner struct {
	cfg     Config
	db      DB
	handler Handler
	m       *metrics
	backoff backoff
	outages *outages

	joined atomic.Bool // inside a group session
	ran    atomic.Bool

	// Set by Run before any claim starts.
	dl      *deadLetterer
	failMu  sync.Mutex
	failErr error
	cancel  context.CancelFunc
}

// New checks cfg (after defaults) and returns a Runner that applies events
// with h through transactions of db. It does no I/O.
func New(cfg Config, db DB, h Handler) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || h == nil {
		return nil, errors.New("worker needs a database and a handler")
	}
	m, err := newMetrics(cfg.Registerer, cfg.Consumer, cfg.Topics)
	if err != nil {
		return nil, err
	}
	b := newBackoff(cfg.RetryBackoff, cfg.MaxBackoff)
	if cfg.hooks.jitter != nil {
		b.jitter = cfg.hooks.jitter
	}
	return &Runner{cfg: cfg, db: db, handler: h, m: m, backoff: b, outages: newOutages(&cfg, m)}, nil
}

// Ready reports nil while the Runner is a member of its consumer group (it
// may hold no partition when the group has more members than partitions)
// and no partition waits for the database or for a dead letter's ack; else
// it says why.
func (r *Runner) Ready(context.Context) error {
	if err := r.outages.err(); err != nil {
		return err
	}
	if !r.joined.Load() {
		return fmt.Errorf("not a member of consumer group %s yet", r.cfg.Group)
	}
	return nil
}

// Run waits for the database (see WaitForDatabase), checks its schema (see
// CheckSchema) and that its role may write processed_events, joins the
// group and applies events until ctx ends, then finishes the transactions
// in flight, commits the marked offsets, leaves the group and returns nil.
// It returns an error when it cannot connect to Kafka, the database lacks
// the worker's schema, its role may not write the inbox, or something fails
// that retrying cannot mend. A Runner runs once.
func (r *Runner) Run(ctx context.Context) error {
	if !r.ran.CompareAndSwap(false, true) {
		return errors.New("worker runner already ran")
	}
	if err := waitForDatabase(ctx, r.db, r.outages.database, r.backoff); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := CheckSchema(ctx, r.db); err != nil {
		return err
	}
	if err := checkInboxPrivileges(ctx, r.db); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel

	dl, err := newDeadLetterer(r.cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := dl.close(); err != nil {
			r.cfg.Logger.Warn("close dead-letter producer", "error", err)
		}
	}()
	r.dl = dl

	group, closeClient, err := r.cfg.newConsumerGroup()
	if err != nil {
		return fmt.Errorf("create consumer group %s: %w", r.cfg.Group, err)
	}
	defer func() {
		if err := closeClient(); err != nil {
			r.cfg.Logger.Warn("close Kafka client", "error", err)
		}
	}()
	var g errgroup.Group
	g.Go(func() error {
		for err := range group.Errors() {
			r.outages.kafka.fail("group", "consumer group error", err)
		}
		return nil
	})
	g.Go(func() error {
		err := r.consume(ctx, group)
		if cerr := group.Close(); cerr != nil {
			r.cfg.Logger.Warn("leave consumer group", "error", cerr)
		}
		return err
	})
	err = g.Wait()
	if ferr := r.failure(); ferr != nil {
		return ferr
	}
	return err
}

// maxJoinBackoff caps the wait between failed joins (a topic not created
// yet, a broker away): joining is cheap, and a topic should be picked up
// soon after it appears.
const maxJoinBackoff = 5 * time.Second

// consume runs group sessions until ctx ends; each rebalance ends one.
func (r *Runner) consume(ctx context.Context, group sarama.ConsumerGroup) error {
	h := &groupHandler{r: r}
	joinBackoff := newBackoff(r.cfg.RetryBackoff, max(r.cfg.RetryBackoff, min(r.cfg.MaxBackoff, maxJoinBackoff)))
	for failures := 0; ; {
		err := group.Consume(ctx, r.cfg.Topics, h)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			failures = 0
			continue
		case errors.Is(err, sarama.ErrClosedConsumerGroup):
			return err
		}
		failures++
		wait := joinBackoff.delay(failures)
		r.outages.kafka.fail("group", "consumer group session failed; joining again", err, "retry_in", wait)
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// fail stops the Runner with err, as a crash would at that point: nothing
// after it is marked.
func (r *Runner) fail(err error) {
	r.failMu.Lock()
	if r.failErr == nil {
		r.failErr = err
	}
	r.failMu.Unlock()
	r.cancel()
}

func (r *Runner) failure() error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	return r.failErr
}

package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventforge/eventforge/cdc/topics"

	"github.com/eventforge/eventforge/cdc/setaside"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/pgoutput"
	"github.com/eventforge/eventforge/internal/shared/backoff"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Relay streams one slot to Kafka. Create it with New and call Run once.
type Relay struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	limits *topics.Limits

	catalog *outbox.Catalog // the mapping as checked at the session's start

	// textTuples, once set, keeps pgoutput in text format: a needed column
	// had a type the decoder cannot read in binary.
	textTuples atomic.Bool

	confirmed atomic.Uint64 // last flush position sent to the slot
	pos       serverPos     // the server of confirmed
	checkNow  chan struct{} // asks for a failover check (a session started streaming)

	mu       sync.Mutex
	state    string // connecting, streaming, standby, reconnecting
	lastErr  string
	kafkaErr string // why the latest Kafka probe failed; "" when it answered
}

// Relay states, reported by /readyz.
const (
	stateConnecting   = "connecting"
	stateStreaming    = "streaming"
	stateStandby      = "standby"
	stateReconnecting = "reconnecting"
)

// New checks cfg and registers the relay's metrics on reg and its readiness
// check on ready (either may be nil).
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer, ready ReadinessRegistrar) (*Relay, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg, cfg.Slot)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	log = log.With("slot", cfg.Slot)
	r := &Relay{cfg: cfg, log: log, m: m, limits: topics.NewLimits(cfg.MaxMessageBytes, log),
		state: stateConnecting, checkNow: make(chan struct{}, 1)}
	if ready != nil {
		ready.Add("cdc", r.ready)
	}
	return r, nil
}

// ready is ready while streaming to a Kafka that answers, or waiting as a
// healthy standby.
func (r *Relay) ready(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.state == stateStreaming && r.kafkaErr != "":
		return fmt.Errorf("streaming, but Kafka is unreachable: %s", r.kafkaErr)
	case r.state == stateStreaming, r.state == stateStandby:
		return nil
	}
	if r.lastErr != "" {
		return fmt.Errorf("%s: %s", r.state, r.lastErr)
	}
	return errors.New(r.state)
}

// State reports connecting, streaming, standby or reconnecting.
func (r *Relay) State() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

func (r *Relay) setState(s string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
	r.lastErr = ""
	if err != nil {
		r.lastErr = err.Error()
	}
	r.m.standby.Set(b2f(s == stateStandby))
	r.m.streaming.Set(b2f(s == stateStreaming))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Run relays until ctx ends (then it drains in-flight events, confirms and
// returns nil) or a fatal error (a *FatalError: missing publication, lost
// slot, missing topic with creation disabled, …). Everything else is retried
// with backoff from the slot's confirmed position.
func (r *Relay) Run(ctx context.Context) error {
	mctx, stopMaint := context.WithCancel(context.WithoutCancel(ctx))
	var g errgroup.Group
	g.Go(func() error { r.maintain(mctx); return nil })
	err := r.loop(ctx)
	stopMaint()
	_ = g.Wait()
	return err
}

func (r *Relay) loop(ctx context.Context) error {
	failures := 0
	said := "" // the waiting line last logged
	for {
		r.m.sessions.Inc()
		began := time.Now()
		err := r.session(ctx)
		if ctx.Err() != nil {
			r.setState(stateConnecting, nil)
			return nil
		}
		var fe *FatalError
		if errors.As(err, &fe) {
			r.setState(stateReconnecting, err)
			r.log.Error("relay stopped", "err", err)
			return err
		}
		if state, line, retry, ok := r.waiting(err); ok {
			if line != said {
				r.log.Info(line)
				said = line
			}
			why := err
			if state == stateStandby {
				why = nil // a healthy standby
			}
			r.setState(state, why)
			failures = 0
			if !sleep(ctx, retry) {
				return nil
			}
			continue
		}
		if errors.Is(err, pgoutput.ErrBinaryType) && r.textTuples.CompareAndSwap(false, true) {
			r.log.Info("streaming in text format from now on", "reason", err)
			continue
		}
		if errors.Is(err, errLimitLowered) {
			r.log.Info("restarting session with a lower record limit", "max_message_bytes", r.limits.Current())
			continue
		}
		said = ""
		if time.Since(began) > time.Minute {
			failures = 0
		}
		r.m.sessionErrors.Inc()
		r.setState(stateReconnecting, err)
		wait := backoff.Jitter(backoff.Exponential(r.cfg.ReconnectMin, r.cfg.ReconnectMax, failures), rand.Float64())
		r.log.Warn("stream session ended; reconnecting", "err", err, "retry_in", wait.Round(time.Millisecond))
		if !sleep(ctx, wait) {
			return nil
		}
		failures++
	}
}

// waiting tells whether a session ended to wait rather than failed: another
// relay streams from the slot (standby), or the server is in recovery (a
// standby server, or one being promoted). Neither counts as a session
// error; ok is false for anything else.
func (r *Relay) waiting(err error) (state, line string, retry time.Duration, ok bool) {
	var sb *standbyError
	var rec *recoveryError
	switch {
	case errors.As(err, &sb):
		return stateStandby, fmt.Sprintf("slot %s is active for PID %d; waiting as standby", r.cfg.Slot, sb.pid), r.cfg.StandbyRetry, true
	case errors.As(err, &rec):
		return stateConnecting, err.Error() + "; trying again every second", recoveryRetry, true
	}
	return "", "", 0, false
}

func sleep(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) }

// standbyError ends a session because another process reads the slot.
type standbyError struct{ pid int32 }

func (e *standbyError) Error() string { return fmt.Sprintf("slot is active for PID %d", e.pid) }

// session is one connection to the slot and one producer, from the slot's
// confirmed position until an error or the end of ctx. It returns nil only
// when ctx ended.
func (r *Relay) session(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, r.ioTimeout())
	db, err := connectSQL(cctx, r.cfg.PGURL)
	cancel()
	if err != nil {
		return noPrimary(err)
	}
	defer closeConn(ctx, db.Close)
	wst, err := r.checkDatabase(ctx, db)
	if err != nil {
		return err
	}
	if err := r.claimSlot(ctx, db); err != nil {
		return err
	}
	cctx, cancel = context.WithTimeout(ctx, r.ioTimeout())
	repl, err := connectReplication(cctx, r.cfg.PGURL)
	cancel()
	if err != nil {
		return noPrimary(err)
	}
	defer closeConn(ctx, repl.Close)
	sys, err := pglogrepl.IdentifySystem(ctx, repl)
	if err != nil {
		return fmt.Errorf("identify system: %w", err)
	}
	start, err := r.prepareSlot(ctx, db, repl)
	if err != nil {
		return err
	}
	if err := r.beginPosition(ctx, db, start); err != nil {
		return err
	}
	rejected, err := setaside.Load(ctx, db, start)
	if err != nil {
		return err
	}
	ps, err := newProducerSession(ctx, &r.cfg, r.limits, r.m.produceRequests, r.log)
	if err != nil {
		return err
	}
	if err := r.startReplication(ctx, repl, start); err != nil {
		ps.close()
		return err
	}
	r.setKafka(nil) // the producer just connected
	interval := statusInterval(r.cfg.StatusInterval, wst)
	bound := receiveBound(r.cfg.ReceiveTimeout, r.cfg.HeartbeatInterval, interval, wst)
	unlockSlot(ctx, db, r.cfg.Slot) // the active slot keeps other relays standing by
	r.setState(stateStreaming, nil)
	r.askFailoverCheck()
	r.log.Info("streaming", "from", start, "timeline", sys.Timeline, "status_interval", interval, "receive_timeout", bound)
	return r.stream(ctx, repl, db, ps, start, interval, bound, rejected)
}

// checkDatabase checks, on the session's SQL connection, what streaming
// needs of the server: the publication and its coverage of the outbox, the
// mapping against the catalog, the backfill's column; it returns the
// server's wal_sender_timeout.
func (r *Relay) checkDatabase(ctx context.Context, db *pgx.Conn) (time.Duration, error) {
	if err := checkServer(ctx, db, r.cfg.Publication); err != nil {
		return 0, err
	}
	schema, table, _ := r.cfg.outboxTable()
	if err := checkCoverage(ctx, db, r.cfg.Publication, schema, table); err != nil {
		return 0, err
	}
	var err error
	if r.catalog, err = checkMapping(ctx, db, r.cfg.Mapping); err != nil {
		return 0, err
	}
	if rng, _ := r.cfg.backfillRange(); rng.Bounded() {
		if _, err := r.catalog.CreatedAtColumn("--backfill-since"); err != nil {
			return 0, fatal(err)
		}
	}
	return walSenderTimeout(ctx, db)
}

// claimSlot takes the slot's advisory lock and checks that no other process
// reads the slot (a *standbyError when one does) and that a backfill the
// session would run may read the outbox.
func (r *Relay) claimSlot(ctx context.Context, db *pgx.Conn) error {
	if err := lockSlot(ctx, db, r.cfg.Slot); err != nil {
		return err
	}
	s, err := readSlot(ctx, db, r.cfg.Slot)
	if err != nil {
		return err
	}
	if s.activePID != 0 {
		return &standbyError{pid: s.activePID}
	}
	return r.checkBackfillPrivilege(ctx, db, s)
}

// closeConn closes a connection within a few seconds even after ctx ended
// or when the peer is gone.
func closeConn(ctx context.Context, closeFn func(context.Context) error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = closeFn(cctx)
}

func (r *Relay) startReplication(ctx context.Context, repl *pgconn.PgConn, start pglogrepl.LSN) error {
	err := pglogrepl.StartReplication(ctx, repl, r.cfg.Slot, start, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: r.pluginArgs(repl.ParameterStatus("server_version")),
	})
	if err == nil {
		return nil
	}
	if code, pe := pgErrorCode(err); code == pgerrcode.ObjectInUse { // slot active for another PID: wait as standby
		return &standbyError{pid: activePID(pe)}
	}
	return fmt.Errorf("start replication from slot %s: %w", r.cfg.Slot, err)
}

// activePID digs the PID out of "replication slot … is active for PID N";
// zero when the message has another shape. Only for the log line: the
// decision was made on the SQLSTATE.
func activePID(pe *pgconn.PgError) int32 {
	var pid int32
	for i := len(pe.Message) - 1; i >= 0; i-- {
		if pe.Message[i] == ' ' {
			_, _ = fmt.Sscanf(pe.Message[i+1:], "%d", &pid)
			break
		}
	}
	return pid
}

// stream runs the session's goroutines: the connection owner, the feeder and
// the two drainers of the producer's result channels. Closing the producer
// after them is bounded (see producerSession.shutdown).
func (r *Relay) stream(ctx context.Context, repl *pgconn.PgConn, db *pgx.Conn, ps *producerSession,
	start pglogrepl.LSN, interval, silence time.Duration, rejected setaside.Set) error {
	tr := ack.New(r.cfg.MaxInFlightEvents, r.cfg.MaxInFlightBytes)
	// The session lives on past ctx while it drains; a producer error
	// cancels it with its cause.
	sctx, fail := context.WithCancelCause(context.WithoutCancel(ctx))
	defer fail(nil)
	feed := make(chan *pending, r.cfg.MaxInFlightEvents+1)
	ps.log, ps.m, ps.tr, ps.db, ps.rejected = r.log, r.m, tr, db, rejected
	drained := ps.startDrainers()
	dec := r.decoder()
	dec.SetPayloadType(r.catalog.Types[r.cfg.Mapping.Payload])
	dec.BorrowEvents() // publish builds the record before the next receive
	st := &stream{
		cfg: &r.cfg, log: r.log, m: r.m, conn: pgReplConn{repl}, dec: dec, build: r.builder(fail),
		tr: tr, feed: feed, interval: interval, silence: silence, start: start, sent: start, confirm: r.onConfirm,
		pendings: newPendingPool(),
	}
	// The feeder stops when the stream is done, even while it waits on
	// Kafka for a topic.
	fctx, stopFeed := context.WithCancel(sctx)
	defer stopFeed()
	var g errgroup.Group
	g.Go(func() error {
		defer stopFeed()
		defer close(feed)
		err := st.run(ctx, sctx)
		if err != nil {
			fail(err)
		}
		return err
	})
	g.Go(func() error {
		err := ps.feed(fctx, feed)
		if err != nil {
			fail(err)
		}
		return err
	})
	wctx, stopWatch := context.WithCancel(sctx)
	watched := make(chan struct{})
	go func() { defer close(watched); r.watchKafka(wctx) }()
	err := g.Wait()
	stopWatch()
	<-watched
	ps.shutdown(drained)
	if cause := context.Cause(sctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil {
		return err
	}
	if ctx.Err() == nil {
		return errors.New("stream ended")
	}
	return nil
}

// builder is the session's record builder. A value converter that cannot
// reach what it needs (a schema registry: outbox.ErrUnavailable) ends the
// session with that cause before its event reaches the feeder, whose
// context is then done: the event is neither produced nor set aside, and
// the relay retries it from the slot with backoff, its readiness saying
// why meanwhile.
func (r *Relay) builder(fail context.CancelCauseFunc) *outbox.Builder {
	return outbox.NewBuilder(r.cfg.TopicPrefix).WithFormat(&r.catalog.Mapping).OnUnavailable(func(err error) { fail(err) })
}

// onConfirm records a position sent to the slot.
func (r *Relay) onConfirm(lsn pglogrepl.LSN) {
	r.confirmed.Store(uint64(lsn))
	r.m.confirmedLSN.Set(float64(lsn))
}

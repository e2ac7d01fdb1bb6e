package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/pgoutput"
	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// recordVersion is the Kafka record format sarama sizes records for (v2,
// with headers).
const recordVersion = 2

// pollInterval bounds how long a receive waits, so a shutdown is noticed
// quickly even on an idle stream.
const pollInterval = 250 * time.Millisecond

// ackedStatusGap is the shortest time between status updates sent because
// the acked watermark moved: the slot follows the acks within about this
// (plus pollInterval when the stream is idle), at most a few updates a
// second, instead of once per status interval.
const ackedStatusGap = 100 * time.Millisecond

// stream owns the replication connection of one session: it alone receives
// from it and sends status updates (docs/design.md#one-owner).
type stream struct {
	cfg      *Config
	log      *slog.Logger
	m        *metrics
	conn     replicationConn
	dec      *pgoutput.Decoder
	build    *outbox.Builder
	tr       *ack.Tracker
	feed     chan<- *pending
	pendings *sync.Pool // recycled per-event structs (newPendingPool); nil: none
	interval time.Duration
	silence  time.Duration       // receiveBound: longer without a message means a dead connection
	confirm  func(pglogrepl.LSN) // told every position sent

	start      pglogrepl.LSN // the slot's confirmed position at session start
	sent       pglogrepl.LSN // the last flush position sent
	serverEnd  pglogrepl.LSN // WAL end of the latest keepalive
	commitTime time.Time     // of the open transaction
	final      pglogrepl.LSN // of the open transaction: its BEGIN's final LSN
	txnEvents  int           // events of the open transaction
	nextStatus time.Time
	lastStatus time.Time
	lastRecv   time.Time       // of the latest message, or when receiving resumed
	deadline   time.Time       // read deadline currently set on the socket
	spans      tracing.Batcher // the send spans of the records (cdc/tracing.go)
}

// run streams until the session fails (ctx ends, with the cause) or the relay
// shuts down (stop ends): then it waits, bounded, for in-flight acks. Either
// way it confirms the acked watermark last.
func (s *stream) run(stop, ctx context.Context) (err error) {
	defer func() {
		if ferr := s.sendStatus(); ferr != nil && err == nil && stop.Err() == nil {
			err = ferr
		}
	}()
	now := time.Now()  // of the latest receive: one clock read per message
	s.nextStatus = now // confirm the start position at once
	s.lastRecv = now
	for {
		if stop.Err() != nil {
			s.drain(ctx)
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if s.statusDue(now) {
			if err := s.sendStatus(); err != nil {
				return err
			}
		}
		if !s.tr.HasRoom() {
			if err := s.waitRoom(stop, ctx); err != nil {
				return err
			}
			// Nothing is read while the window is full: silence counts
			// only while the stream waits for the server.
			now = time.Now()
			s.lastRecv = now
			continue
		}
		if now, err = s.receive(ctx, now); err != nil {
			return err
		}
	}
}

// receive handles at most one message, waiting at most until the next status
// update is due. It returns the time the wait ended (now is when it began).
func (s *stream) receive(ctx context.Context, now time.Time) (time.Time, error) {
	dl := now.Add(pollInterval)
	if s.nextStatus.Before(dl) {
		dl = s.nextStatus
	}
	if dl.Sub(s.deadline).Abs() > 50*time.Millisecond {
		if err := s.conn.SetReadDeadline(dl); err != nil {
			return now, fmt.Errorf("set read deadline: %w", err)
		}
		s.deadline = dl
	}
	msg, err := s.conn.ReceiveMessage(context.Background())
	now = time.Now()
	if err != nil {
		if errors.Is(err, errReceiveTimeout) {
			s.deadline = time.Time{} // an expired deadline must be reset
			return now, s.checkSilence(now)
		}
		return now, fmt.Errorf("receive from replication slot: %w", err)
	}
	s.lastRecv = now
	switch msg := msg.(type) {
	case *pgproto3.CopyData:
		return now, s.copyData(ctx, msg.Data)
	case *pgproto3.ErrorResponse:
		return now, fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
	case *pgproto3.CopyDone:
		return now, fmt.Errorf("server ended the replication stream")
	}
	return now, nil
}

func (s *stream) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		s.serverEnd = max(s.serverEnd, ka.ServerWALEnd)
		if ka.ReplyRequested {
			return s.sendStatus()
		}
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		s.m.receivedLSN.Set(float64(x.WALStart))
		return s.xlog(ctx, x)
	}
	return nil
}

func (s *stream) xlog(ctx context.Context, x pglogrepl.XLogData) error {
	it, err := s.dec.Decode(x.WALData)
	if err != nil {
		return s.setAside(ctx, err, x.WALStart) // a bad row, else the session ends
	}
	switch it.Kind {
	case pgoutput.KindBegin:
		s.tr.Begin()
		s.commitTime, s.final, s.txnEvents = it.CommitTime, it.FinalLSN, 0
		if !it.CommitTime.IsZero() {
			s.m.commitToRecv.Observe(time.Since(it.CommitTime).Seconds())
		}
	case pgoutput.KindEvent:
		return s.publish(ctx, it.Event, x.WALStart)
	case pgoutput.KindCommit:
		s.tr.Commit(it.EndLSN)
		s.m.transactions.Inc()
		if s.cfg.ExactlyOnce && s.txnEvents > 0 {
			return s.send(ctx, &pending{txn: it.FinalLSN, end: it.EndLSN}) // a Kafka transaction may end here
		}
	case pgoutput.KindHeartbeat:
		s.m.heartbeatsSeen.Inc()
	case pgoutput.KindIgnored:
		s.m.ignored.WithLabelValues(it.Op).Inc()
	}
	return nil
}

// publish registers the event with the tracker and hands it to the feeder.
// The feed channel holds the whole in-flight window, so this never blocks.
// e is the decoder's borrowed event: nothing here keeps it.
func (s *stream) publish(ctx context.Context, e *outbox.Event, lsn pglogrepl.LSN) error {
	if e.CommitTime.IsZero() {
		e.CommitTime = s.commitTime
	}
	p := s.newPending()
	p.id, p.lsn, p.commit, p.txn = e.ID, lsn, e.CommitTime, s.final
	s.txnEvents++
	if err := s.build.Build(&p.rec, e); err != nil {
		if outbox.IsUnavailable(err) {
			return err // a schema registry did not answer: the session ends and retries; never set aside
		}
		p.reason = err.Error()
		p.rec.Msg = sarama.ProducerMessage{Topic: s.build.Topic(e)}
	}
	s.traceSend(e, p)
	p.msg = &p.rec.Msg
	p.msg.Metadata = p
	p.size = p.msg.ByteSize(recordVersion)
	p.tok = s.tr.Add(p.size)
	if err := s.send(ctx, p); err != nil {
		return err
	}
	failpoint.Hit(failpoint.CDCMidTransaction)
	return nil
}

// newPendingPool recycles a stream's per-event structs, record buffers with
// them: an event the broker acknowledged goes back once acked
// (pending.release), and a later event is built in it. At-least-once
// only: the exactly-once feeder keeps its own references to events.
func newPendingPool() *sync.Pool {
	return &sync.Pool{New: func() any { return new(pending) }}
}

// newPending is an empty pending for the next event: from the stream's
// pool, marked to go back there, in at-least-once mode; a new one otherwise
// (or when the stream has no pool).
func (s *stream) newPending() *pending {
	if s.cfg.ExactlyOnce || s.pendings == nil {
		return new(pending)
	}
	p := s.pendings.Get().(*pending)
	p.pool = s.pendings
	return p
}

// release puts p back in its pool once the broker acknowledged it and its
// ack is counted, if it came from one. A record still in a send span
// (rec.Trace set: not yet settled there) is not reused; a settled one is,
// since its span keeps a copy of what it reports.
func (p *pending) release() {
	pool := p.pool
	if pool == nil || p.rec.Trace != nil {
		return
	}
	p.rec.Reuse()
	*p = pending{rec: p.rec}
	pool.Put(p)
}

// send hands p to the feeder.
func (s *stream) send(ctx context.Context, p *pending) error {
	select {
	case s.feed <- p: // the usual case, without a full select
	default:
		select {
		case s.feed <- p:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// statusDue reports whether a status update should go out now: on
// schedule, or early when the acked watermark moved past what was sent.
func (s *stream) statusDue(now time.Time) bool {
	if !now.Before(s.nextStatus) {
		return true
	}
	return now.Sub(s.lastStatus) >= ackedStatusGap && s.tr.Watermark() > s.sent
}

// waitRoom waits for acks while the window is full, confirming on schedule
// so the server never times the connection out (docs/design.md#status-cadence).
func (s *stream) waitRoom(stop, ctx context.Context) error {
	began := time.Now()
	defer func() { s.m.backpressureSec.Add(time.Since(began).Seconds()) }()
	for !s.tr.HasRoom() {
		s.gauges()
		t := time.NewTimer(time.Until(s.nextStatus))
		select {
		case <-s.tr.Changed():
		case <-t.C:
			if err := s.sendStatus(); err != nil {
				t.Stop()
				return err
			}
		case <-ctx.Done():
		case <-stop.Done():
		}
		t.Stop()
		if ctx.Err() != nil || stop.Err() != nil {
			return nil // run decides
		}
	}
	return nil
}

// drain waits up to the shutdown timeout for in-flight events to be acked,
// still confirming on schedule.
func (s *stream) drain(ctx context.Context) {
	timeout := time.NewTimer(s.cfg.ShutdownTimeout)
	defer timeout.Stop()
	for {
		if n, _ := s.tr.InFlight(); n == 0 {
			return
		}
		t := time.NewTimer(time.Until(s.nextStatus))
		select {
		case <-s.tr.Changed():
		case <-t.C:
			if err := s.sendStatus(); err != nil {
				t.Stop()
				return
			}
		case <-timeout.C:
			n, b := s.tr.InFlight()
			s.log.Warn("shutdown timeout: events still in flight will be sent again on restart", "events", n, "bytes", b)
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// position is what may be confirmed: the acked watermark, or the server's
// WAL end when nothing is open or in flight (docs/design.md#flush-confirms, #status-cadence). Never backwards.
func (s *stream) position() pglogrepl.LSN {
	pos := max(s.start, s.tr.Watermark(), s.sent)
	if s.tr.Idle() && s.serverEnd > pos {
		pos = s.serverEnd
	}
	return pos
}

// sendStatus confirms position(): write, flush and apply all set to it, since
// pglogrepl would fill zero ones from write (docs/design.md#flush-confirms). When the server
// has been silent for a status interval the update asks for a reply, so a
// live server is never silent for long; the write has a deadline, so a
// dead peer cannot block it.
func (s *stream) sendStatus() error {
	pos := s.position()
	if s.silence > 0 {
		if err := s.conn.SetWriteDeadline(time.Now().Add(s.silence)); err != nil {
			return fmt.Errorf("set write deadline: %w", err)
		}
	}
	err := s.conn.SendStandbyStatus(context.Background(), pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos,
		WALFlushPosition: pos,
		WALApplyPosition: pos,
		ClientTime:       time.Now(),
		ReplyRequested:   time.Since(s.lastRecv) >= s.interval,
	})
	if err != nil {
		return fmt.Errorf("send standby status update: %w", err)
	}
	s.lastStatus = time.Now()
	s.nextStatus = s.lastStatus.Add(s.interval)
	s.m.statusUpdates.Inc()
	s.gauges()
	if pos != s.sent {
		s.log.Debug("confirmed", "lsn", pos)
		failpoint.Hit(failpoint.CDCAfterConfirm) // the update is on the wire
	}
	s.sent = pos
	s.confirm(pos)
	return nil
}

func (s *stream) gauges() {
	n, b := s.tr.InFlight()
	s.m.inFlightEvents.Set(float64(n))
	s.m.inFlightBytes.Set(float64(b))
}

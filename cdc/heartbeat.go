package cdc

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/cdc/pgoutput"
	"github.com/eventforge/eventforge/internal/shared/slots"
)

// maintain runs beside the stream sessions on its own connection: heartbeats
// (docs/design.md#heartbeat), slot sampling for metrics, and throttled relay_state
// writes (docs/design.md#no-silent-slot-recreation). Failures are logged and retried on the next tick;
// they never stop the relay. On exit it writes the last confirmed position.
func (r *Relay) maintain(ctx context.Context) {
	m := &maintenanceConn{r: r, ctx: ctx}
	var done written
	defer r.writeLastState(ctx, m, &done)
	hb := tickerOrNil(r.cfg.HeartbeatInterval)
	sample := time.NewTicker(r.cfg.SlotSampleInterval)
	state := time.NewTicker(r.cfg.StateWriteInterval)
	defer sample.Stop()
	defer state.Stop()
	var guard protectionGuard
	if hb != nil {
		defer hb.Stop()
	}
	m.do("slot sampling", r.sampleSlot)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tickC(hb):
			if r.State() == stateStreaming {
				m.do("heartbeat", r.heartbeat)
			}
		case <-sample.C:
			m.do("slot sampling", func(ctx context.Context, c *pgx.Conn) error { return r.sampleAndGuard(ctx, c, &guard) })
		case <-state.C:
			m.do("relay_state update", func(ctx context.Context, c *pgx.Conn) error { return r.writeState(ctx, c, &done) })
		}
	}
}

// maintenanceConn is maintain's connection: opened when an operation needs
// it, dropped when one fails, so the next tick opens a fresh one.
type maintenanceConn struct {
	r    *Relay
	ctx  context.Context
	conn *pgx.Conn
}

// get returns the connection, opening it (within ioTimeout) when there is
// none; nil when it cannot be opened now.
func (m *maintenanceConn) get() *pgx.Conn {
	if m.conn == nil {
		cctx, cancel := context.WithTimeout(m.ctx, m.r.ioTimeout())
		c, err := connectSQL(cctx, m.r.cfg.PGURL)
		cancel()
		if err != nil {
			m.r.log.Debug("maintenance connection", "err", err)
			return nil
		}
		m.conn = c
	}
	return m.conn
}

// drop logs a failed operation (unless the relay is stopping) and closes
// the connection.
func (m *maintenanceConn) drop(what string, err error) {
	if m.ctx.Err() == nil {
		m.r.log.Warn(what+" failed", "err", err)
	}
	if m.conn != nil {
		closeConn(m.ctx, m.conn.Close) // bounded: the peer may be gone
		m.conn = nil
	}
}

// do runs one maintenance operation, named what in the log, within
// ioTimeout; a failure drops the connection.
func (m *maintenanceConn) do(what string, op func(context.Context, *pgx.Conn) error) {
	if c := m.get(); c != nil {
		if err := m.r.bounded(m.ctx, c, op); err != nil {
			m.drop(what, err)
		}
	}
}

// writeLastState records the last confirmed position when maintain ends (a
// clean shutdown's last confirmation included) and closes the connection.
func (r *Relay) writeLastState(ctx context.Context, m *maintenanceConn, done *written) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if m.conn == nil && pglogrepl.LSN(r.confirmed.Load()) > done.lsn {
		m.conn, _ = connectSQL(fctx, r.cfg.PGURL)
	}
	if m.conn != nil {
		if err := r.writeState(fctx, m.conn, done); err != nil {
			r.log.Warn("relay_state update failed", "err", err)
		}
		m.conn.Close(fctx)
	}
}

// ioTimeout bounds each maintenance query and every connection attempt, so
// a dead or black-holed connection cannot stall heartbeats, relay_state
// writes or a reconnect: the receive timeout when configured, else 30s.
func (r *Relay) ioTimeout() time.Duration {
	if r.cfg.ReceiveTimeout > 0 {
		return r.cfg.ReceiveTimeout
	}
	return 30 * time.Second
}

// bounded runs one maintenance operation within ioTimeout.
func (r *Relay) bounded(ctx context.Context, c *pgx.Conn, op func(context.Context, *pgx.Conn) error) error {
	octx, cancel := context.WithTimeout(ctx, r.ioTimeout())
	defer cancel()
	return op(octx, c)
}

func tickerOrNil(d time.Duration) *time.Ticker {
	if d <= 0 {
		return nil
	}
	return time.NewTicker(d)
}

func tickC(t *time.Ticker) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// heartbeat writes a transactional logical message; the relay receives it in
// a transaction of its own and confirms that transaction's end like any
// other, so the slot keeps up with the WAL of a database whose outbox is
// quiet.
func (r *Relay) heartbeat(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2)",
		pgoutput.HeartbeatPrefix, time.Now().UTC().Format(time.RFC3339Nano))
	if err == nil {
		r.m.heartbeatsSent.Inc()
	}
	return err
}

func (r *Relay) sampleSlot(ctx context.Context, conn *pgx.Conn) error {
	s, err := slots.Status(ctx, conn, r.cfg.Slot)
	if errors.Is(err, slots.ErrSlotNotFound) {
		r.m.slotGauges.Forget(r.cfg.Slot)
		return nil
	}
	if err != nil {
		return err
	}
	if s.LagBytes != nil {
		r.m.slotLag.WithLabelValues(r.cfg.Slot).Set(float64(*s.LagBytes))
	}
	if s.RetainedBytes != nil {
		r.m.slotRetained.WithLabelValues(r.cfg.Slot).Set(float64(*s.RetainedBytes))
	}
	r.m.slotGauges.Observe(s)
	return nil
}

package cdc

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/cdc/pgoutput"
	"github.com/eventforge/eventforge/internal/slots"
)

// maintain runs beside the stream sessions on its own connection: heartbeats
// (docs/design.md#heartbeat), slot sampling for metrics, and throttled relay_state
// writes (docs/design.md#no-silent-slot-recreation). Failures are logged and retried on the next tick;
// they never stop the relay. On exit it writes the last confirmed position.
func (r *Relay) maintain(ctx context.Context) {
	var (
		conn *pgx.Conn
		done written
	)
	defer func() {
		// The last confirmation of a clean shutdown is recorded too.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if conn == nil && pglogrepl.LSN(r.confirmed.Load()) > done.lsn {
			conn, _ = connectSQL(fctx, r.cfg.PGURL)
		}
		if conn != nil {
			if err := r.writeState(fctx, conn, &done); err != nil {
				r.log.Warn("relay_state update failed", "err", err)
			}
			conn.Close(fctx)
		}
	}()
	hb := tickerOrNil(r.cfg.HeartbeatInterval)
	sample := time.NewTicker(r.cfg.SlotSampleInterval)
	state := time.NewTicker(r.cfg.StateWriteInterval)
	defer sample.Stop()
	defer state.Stop()
	var guard protectionGuard
	if hb != nil {
		defer hb.Stop()
	}
	get := func() *pgx.Conn {
		if conn == nil {
			cctx, cancel := context.WithTimeout(ctx, r.ioTimeout())
			c, err := connectSQL(cctx, r.cfg.PGURL)
			cancel()
			if err != nil {
				r.log.Debug("maintenance connection", "err", err)
				return nil
			}
			conn = c
		}
		return conn
	}
	drop := func(what string, err error) {
		if ctx.Err() == nil {
			r.log.Warn(what+" failed", "err", err)
		}
		if conn != nil {
			closeConn(ctx, conn.Close) // bounded: the peer may be gone
			conn = nil
		}
	}
	if c := get(); c != nil {
		if err := r.bounded(ctx, c, r.sampleSlot); err != nil {
			drop("slot sampling", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tickC(hb):
			if r.State() != stateStreaming {
				continue
			}
			if c := get(); c != nil {
				if err := r.bounded(ctx, c, r.heartbeat); err != nil {
					drop("heartbeat", err)
				}
			}
		case <-sample.C:
			if c := get(); c != nil {
				err := r.bounded(ctx, c, func(ctx context.Context, c *pgx.Conn) error { return r.sampleAndGuard(ctx, c, &guard) })
				if err != nil {
					drop("slot sampling", err)
				}
			}
		case <-state.C:
			if c := get(); c != nil {
				err := r.bounded(ctx, c, func(ctx context.Context, c *pgx.Conn) error { return r.writeState(ctx, c, &done) })
				if err != nil {
					drop("relay_state update", err)
				}
			}
		}
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

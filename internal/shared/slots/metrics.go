package slots

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauges are the slot series that complete eventforge_slot_lag_bytes and
// eventforge_slot_retained_wal_bytes: whether a walsender holds the slot, its
// wal_status (one series per state, 1 for the current one, so an alert can
// match a state without string labels changing value), and how much more WAL
// may be written before the slot is lost. The relay samples the slot and
// calls Observe.
type Gauges struct {
	active    *prometheus.GaugeVec // slot
	walStatus *prometheus.GaugeVec // slot, status
	safeWAL   *prometheus.GaugeVec // slot
	failover  *prometheus.GaugeVec // slot
}

// NewGauges registers the gauges on reg.
func NewGauges(reg prometheus.Registerer) (*Gauges, error) {
	g := &Gauges{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_slot_active",
			Help: "1 while a walsender streams from the slot (pg_replication_slots.active).",
		}, []string{"slot"}),
		walStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_slot_wal_status",
			Help: "1 for the slot's current wal_status (reserved, extended, unreserved, lost), 0 for the others.",
		}, []string{"slot", "status"}),
		safeWAL: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_slot_safe_wal_size_bytes",
			Help: "WAL that may still be written before the slot is in danger of losing what it needs (pg_replication_slots.safe_wal_size); absent when max_slot_wal_keep_size is -1.",
		}, []string{"slot"}),
		failover: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_slot_failover_ready",
			Help: "1 while the slot would survive the promotion of a standby (a PostgreSQL 17 failover slot, synchronized_standby_slots naming active physical slots, and with --standby-url a synced copy on the standby), 0 otherwise (also before PostgreSQL 17).",
		}, []string{"slot"}),
	}
	for _, c := range []prometheus.Collector{g.active, g.walStatus, g.safeWAL, g.failover} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register slot metrics: %w", err)
		}
	}
	return g, nil
}

// Observe sets the gauges of s.Name from a reading of the slot.
func (g *Gauges) Observe(s Slot) {
	g.active.WithLabelValues(s.Name).Set(boolFloat(s.Active))
	// A state no PostgreSQL of today reports would read 0 everywhere.
	for _, st := range WALStatuses {
		g.walStatus.WithLabelValues(s.Name, st).Set(boolFloat(st == s.WALStatus))
	}
	if s.SafeWALSize == nil {
		g.safeWAL.DeleteLabelValues(s.Name)
	} else {
		g.safeWAL.WithLabelValues(s.Name).Set(float64(*s.SafeWALSize))
	}
}

// ObserveProtection sets eventforge_slot_failover_ready of p.Slot.
func (g *Gauges) ObserveProtection(p Protection) {
	g.failover.WithLabelValues(p.Slot).Set(boolFloat(p.Ready()))
}

// Forget removes the series of a slot that no longer exists.
func (g *Gauges) Forget(slot string) {
	g.active.DeleteLabelValues(slot)
	g.failover.DeleteLabelValues(slot)
	g.walStatus.DeletePartialMatch(prometheus.Labels{"slot": slot})
	g.safeWAL.DeleteLabelValues(slot)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

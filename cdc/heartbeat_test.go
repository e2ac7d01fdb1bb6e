package cdc

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// metricValue reads a counter or gauge (the first series of name) from reg.
func metricValue(t testing.TB, r *running, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestHeartbeatKeepsSlotNearWALEnd writes only to another table: heartbeats
// travel through the slot and their confirmation keeps the slot's lag small
// (docs/design.md#heartbeat).
func TestHeartbeatKeepsSlotNearWALEnd(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.HeartbeatInterval = 200 * time.Millisecond
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	start := currentLSN(t, db)
	for range 20 {
		mustExec(t, db, "INSERT INTO orders (id, status, customer) SELECT gen_random_uuid()::text, 'created', repeat(md5(random()::text), 30) FROM generate_series(1, 1500)")
	}
	written := currentLSN(t, db) - start
	if written < 20<<20 {
		t.Fatalf("wrote only %d bytes of WAL; the test needs more than the lag bound", written)
	}
	const bound = 4 << 20
	var lag uint64
	waitFor(t, 20*time.Second, "slot lag under 4 MB", func() bool {
		lag = uint64(currentLSN(t, db) - slotConfirmed(t, db, cfg.Slot))
		return lag < bound
	})
	waitFor(t, 10*time.Second, "heartbeats received", func() bool { return metricValue(t, r, "eventforge_cdc_heartbeats_received_total") > 0 })
	waitFor(t, 10*time.Second, "lag metric sampled", func() bool {
		v := metricValue(t, r, "eventforge_slot_lag_bytes")
		return v > 0 && v < bound
	})
	waitFor(t, 10*time.Second, "slot active sampled", func() bool { return metricValue(t, r, "eventforge_slot_active") == 1 })
	var outboxRows int
	if err := db.QueryRow(context.Background(), "SELECT count(*) FROM outbox").Scan(&outboxRows); err != nil || outboxRows != 0 {
		t.Fatalf("outbox rows %d (%v): the test must keep the outbox quiet", outboxRows, err)
	}
	t.Logf("wrote %d MB of WAL to another table; slot lag %d bytes; heartbeats sent %.0f received %.0f", written>>20, lag,
		metricValue(t, r, "eventforge_cdc_heartbeats_sent_total"), metricValue(t, r, "eventforge_cdc_heartbeats_received_total"))
}

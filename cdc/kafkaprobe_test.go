package cdc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestUnreachableKafkaTurnsNotReady stops the broker of an idle relay: within
// a few probe intervals /readyz says why it is not ready and one line is
// logged; when the broker is back the relay is ready again, logs that once,
// and publishes.
func TestUnreachableKafkaTurnsNotReady(t *testing.T) {
	t.Parallel() // mostly waits for a private broker
	env := testenv.Shared(t)
	k := testenv.StartKafka(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	cfg := testConfig(t, url, k.Brokers())
	cfg.KafkaProbeInterval = 500 * time.Millisecond
	log, logs := logBuffer(t)
	r := startRelayLog(t, cfg, log)
	ready := func() error { return r.ready(context.Background()) }
	waitFor(t, 30*time.Second, "ready", func() bool { return ready() == nil })
	w := newWriter(t, db, 10)
	w.txn(10, false, true)
	col := consume(t, k.Brokers(), cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)

	k.Stop(t)
	stopped := time.Now()
	// The probe timeout is 5s; a stopped broker refuses at once.
	waitFor(t, 15*time.Second, "not ready", func() bool { return ready() != nil })
	t.Logf("not ready %s after the broker stopped: %v", time.Since(stopped).Round(time.Millisecond), ready())
	if err := ready(); !strings.Contains(err.Error(), "Kafka is unreachable") {
		t.Fatalf("readiness says %q, want the reason", err)
	}
	if v := metricValue(t, r, "eventforge_cdc_kafka_reachable"); v != 0 {
		t.Fatalf("eventforge_cdc_kafka_reachable = %v while the broker is down", v)
	}
	time.Sleep(4 * cfg.KafkaProbeInterval) // more failed probes: still one line
	if n := strings.Count(logs.String(), "Kafka unreachable"); n != 1 {
		t.Fatalf("%d lines say Kafka is unreachable, want 1", n)
	}

	k.Start(t)
	waitFor(t, 60*time.Second, "ready again", func() bool { return ready() == nil })
	if n := strings.Count(logs.String(), "Kafka reachable again"); n != 1 {
		t.Fatalf("%d lines say Kafka is back, want 1", n)
	}
	w.txn(10, false, true)
	waitDistinct(t, col, w.committed, 60*time.Second)
}

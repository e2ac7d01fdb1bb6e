package worker

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Runner's Prometheus series; no label names an event.
type metrics struct {
	consumer       string
	events         *prometheus.CounterVec   // consumer, topic, result
	retries        *prometheus.CounterVec   // consumer, topic
	applySeconds   *prometheus.HistogramVec // mode: single or batch
	lag            *prometheus.GaugeVec     // topic, partition
	batchSize      prometheus.Histogram
	batchFallbacks prometheus.Counter
	rebalances     prometheus.Counter
	partitions     prometheus.Gauge
}

// Labels of eventforge_worker_events_total's result.
const (
	resultApplied   = "applied"
	resultDuplicate = "duplicate"
	resultSkipped   = "skipped"
	resultDLQ       = "dlq"
)

func newMetrics(reg prometheus.Registerer, consumer string) (*metrics, error) {
	m := &metrics{
		consumer: consumer,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_worker_events_total",
			Help: "Events handled, by result: applied, duplicate (already in the inbox), skipped (recorded without effect) or dlq (dead-lettered).",
		}, []string{"consumer", "topic", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_worker_retries_total",
			Help: "Failed apply attempts that were retried in place.",
		}, []string{"consumer", "topic"}),
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventforge_worker_apply_seconds",
			Help:    "Duration of one inbox transaction (one event, or one batch), successful or not.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"mode"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_worker_consumer_lag",
			Help: "Messages behind the partition's high watermark, for the partitions this worker holds.",
		}, []string{"topic", "partition"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventforge_worker_batch_size",
			Help:    "Messages taken together from one partition.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		batchFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_worker_batch_fallbacks_total",
			Help: "Batch transactions that failed and were redone one event at a time.",
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_worker_rebalances_total",
			Help: "Consumer group sessions started (one per rebalance).",
		}),
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_worker_assigned_partitions",
			Help: "Partitions this worker holds in the current session.",
		}),
	}
	for _, c := range []prometheus.Collector{m.events, m.retries, m.applySeconds, m.lag, m.batchSize, m.batchFallbacks, m.rebalances, m.partitions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register worker metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) count(topic, result string, n int) {
	m.events.WithLabelValues(m.consumer, topic, result).Add(float64(n))
}

func (m *metrics) retried(topic string) { m.retries.WithLabelValues(m.consumer, topic).Inc() }

func (m *metrics) setLag(topic string, partition int32, lag int64) {
	m.lag.WithLabelValues(topic, strconv.Itoa(int(partition))).Set(float64(max(lag, 0)))
}

func (m *metrics) dropLag(topic string, partition int32) {
	m.lag.DeleteLabelValues(topic, strconv.Itoa(int(partition)))
}

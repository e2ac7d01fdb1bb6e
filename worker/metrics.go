package worker

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker/dlq"
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
	deadLetters    *deadLetterAges
	waiting        *prometheus.GaugeVec   // cause
	outageErrors   *prometheus.CounterVec // cause
}

// Labels of eventforge_worker_events_total's result.
const (
	resultApplied   = "applied"
	resultDuplicate = "duplicate"
	resultSkipped   = "skipped"
	resultDLQ       = "dlq"
)

// newMetrics registers the Runner's series on reg. The dlq result and the
// dead-letter age of every consumed topic exist from the start, at 0, so
// increase() sees a worker's first dead letter.
func newMetrics(reg prometheus.Registerer, consumer string, topics []string) (*metrics, error) {
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
		deadLetters: newDeadLetterAges(topics, time.Now),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_worker_outage_waiting",
			Help: "Partitions (or the group, for kafka) waiting out an outage now, by cause: database, schema, kafka, dead-letter.",
		}, []string{"cause"}),
		outageErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_worker_outage_errors_total",
			Help: "Failures waited out without spending attempts, by cause: database, schema, kafka, dead-letter (the logs show one line per outage).",
		}, []string{"cause"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.retries, m.applySeconds, m.lag, m.batchSize, m.batchFallbacks, m.rebalances, m.partitions, m.deadLetters, m.waiting, m.outageErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register worker metrics: %w", err)
		}
	}
	for _, t := range topics {
		m.events.WithLabelValues(consumer, t, resultDLQ)
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

// maxPendingDeadLetters bounds the dead letters remembered per topic; beyond
// it new ones are not remembered, which keeps the oldest (the ones the age
// reads) and loses only the ability to clear the newest.
const maxPendingDeadLetters = 100_000

// deadLetterAges is eventforge_worker_dlq_oldest_age_seconds{topic}: per
// dead-letter topic, the age of the oldest dead letter this worker produced
// since it started and has not seen handled since, 0 when there is none.
// A dead letter counts as handled when this worker later applies (or finds
// skips) an event with the same event_id from the original topic — what
// `dlq replay` leads to. A duplicate does not count: the inbox records dead
// letters, so a copy of a dead-lettered event is one. The topic itself cannot tell: it is a
// log, and replay leaves the letters in it. What this does not see: letters
// of another worker's partitions replayed to this one are cleared there and
// not here, and a restart forgets every letter (the age starts again from
// the next one). Malformed records (no event_id) stay until restart.
type deadLetterAges struct {
	desc   *prometheus.Desc
	now    func() time.Time
	topics []string // source topics, exported from the start

	mu      sync.Mutex
	pending map[string]map[string]time.Time // source topic → event key → first dead-lettered
	n       atomic.Int64                    // entries in pending, read without the lock
}

func newDeadLetterAges(topics []string, now func() time.Time) *deadLetterAges {
	return &deadLetterAges{
		desc: prometheus.NewDesc("eventforge_worker_dlq_oldest_age_seconds",
			"Age of the oldest dead letter this worker produced since it started whose event it has not applied since, per dead-letter topic; 0 when none.",
			[]string{"topic"}, nil),
		now:     now,
		topics:  slices.Clone(topics),
		pending: map[string]map[string]time.Time{},
	}
}

// add remembers the dead letter of m, keyed by its event id header (event_id,
// or ce_id or id for CloudEvents and Debezium records; or its
// position when it has none: such a letter is never replayed).
func (d *deadLetterAges) add(m *sarama.ConsumerMessage) {
	key := fmt.Sprintf("%d@%d", m.Partition, m.Offset)
	if id, ok := outbox.EventIDHeader(m.Headers); ok {
		key = id
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byKey := d.pending[m.Topic]
	if byKey == nil {
		byKey = map[string]time.Time{}
		d.pending[m.Topic] = byKey
	}
	if _, ok := byKey[key]; ok || len(byKey) >= maxPendingDeadLetters {
		return
	}
	byKey[key] = d.now()
	d.n.Add(1)
}

// handled forgets the dead letters of evs, events of topic that were just
// applied or skipped (results[i] is evs[i]'s).
func (d *deadLetterAges) handled(topic string, evs []Event, results []Result) {
	if d.n.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byKey := d.pending[topic]
	for i, ev := range evs {
		if results[i] == Duplicate {
			continue
		}
		key := ev.ID.String()
		if _, ok := byKey[key]; ok {
			delete(byKey, key)
			d.n.Add(-1)
		}
	}
}

// Describe implements prometheus.Collector.
func (d *deadLetterAges) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

// Collect implements prometheus.Collector.
func (d *deadLetterAges) Collect(ch chan<- prometheus.Metric) {
	now := d.now()
	d.mu.Lock()
	ages := make(map[string]float64, len(d.topics)+len(d.pending))
	for _, t := range d.topics {
		ages[t] = 0
	}
	for t, byKey := range d.pending {
		age := 0.0
		for _, at := range byKey {
			age = max(age, now.Sub(at).Seconds())
		}
		ages[t] = age
	}
	d.mu.Unlock()
	for t, age := range ages {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, age, dlq.Topic(t))
	}
}

package cdc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/slots"
)

// metrics are the relay's Prometheus series. Names in the contract are fixed;
// none carries a per-event label.
type metrics struct {
	published     *prometheus.CounterVec // topic
	publishedB    *prometheus.CounterVec // topic
	publishErrors prometheus.Counter
	confirmedLSN  prometheus.Gauge
	commitToAck   prometheus.Histogram
	commitToRecv  prometheus.Histogram
	slotLag       *prometheus.GaugeVec // slot
	slotGauges    *slots.Gauges        // active, wal_status, safe WAL size
	slotRetained  *prometheus.GaugeVec // slot

	receivedLSN     prometheus.Gauge
	inFlightEvents  prometheus.Gauge
	inFlightBytes   prometheus.Gauge
	sessions        prometheus.Counter
	sessionErrors   prometheus.Counter
	heartbeatsSent  prometheus.Counter
	heartbeatsSeen  prometheus.Counter
	rejected        prometheus.Counter
	ignored         *prometheus.CounterVec // op
	standby         prometheus.Gauge
	streaming       prometheus.Gauge
	transactions    prometheus.Counter
	statusUpdates   prometheus.Counter
	backpressureSec prometheus.Counter
	kafkaReachable  prometheus.Gauge
	kafkaTxns       *prometheus.CounterVec // result
	eosSkipped      prometheus.Counter
	// produceRequests is the sarama metric registry of every producer
	// session: eventforge_cdc_produce_requests_total reads it at scrape time.
	produceRequests *kafka.ProduceRequests
}

func newMetrics(reg prometheus.Registerer, slot string) (*metrics, error) {
	m := &metrics{
		produceRequests: kafka.NewProduceRequests(),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_cdc_events_published_total",
			Help: "Outbox events the broker acknowledged, by topic.",
		}, []string{"topic"}),
		publishedB: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_cdc_bytes_published_total",
			Help: "Encoded size of the outbox events the broker acknowledged, by topic.",
		}, []string{"topic"}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_publish_errors_total",
			Help: "Records the producer returned as failed: each is retried in place, set aside in outbox_rejected or stops the relay, by error class.",
		}),
		confirmedLSN: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_confirmed_lsn",
			Help: "Flush position last confirmed to the slot (an LSN as a number).",
		}),
		commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventforge_cdc_commit_to_ack_seconds",
			Help:    "Time from the transaction's commit timestamp to the broker's ack of its event.",
			Buckets: commitToAckBuckets(),
		}),
		commitToRecv: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventforge_cdc_commit_to_receive_seconds",
			Help:    "Time from the transaction's commit timestamp to the relay's receipt of its first event: the server's share of commit-to-ack.",
			Buckets: commitToAckBuckets(),
		}),
		slotLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_slot_lag_bytes",
			Help: "pg_current_wal_lsn() - confirmed_flush_lsn of the slot.",
		}, []string{"slot"}),
		slotRetained: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eventforge_slot_retained_wal_bytes",
			Help: "pg_current_wal_lsn() - restart_lsn of the slot: WAL the server keeps for it.",
		}, []string{"slot"}),
		receivedLSN: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_received_lsn",
			Help: "Highest WAL position received from the slot in this session.",
		}),
		inFlightEvents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_in_flight_events",
			Help: "Events handed to the producer and not yet acknowledged.",
		}),
		inFlightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_in_flight_bytes",
			Help: "Encoded size of the in-flight events.",
		}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_sessions_total",
			Help: "Stream sessions started (the first one and every reconnect).",
		}),
		sessionErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_session_errors_total",
			Help: "Stream sessions that ended with an error and were retried.",
		}),
		heartbeatsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_heartbeats_sent_total",
			Help: "Heartbeat messages written to the WAL.",
		}),
		heartbeatsSeen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_heartbeats_received_total",
			Help: "Heartbeat messages received back through the slot.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_rejected_total",
			Help: "Events recorded in outbox_rejected instead of being produced (too large, invalid topic, a record the broker refuses for good, a row the decoder refuses).",
		}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_cdc_ignored_changes_total",
			Help: "Updates, deletes and truncates of the outbox, never published.",
		}, []string{"op"}),
		standby: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_standby",
			Help: "1 while this relay waits because another one reads the slot.",
		}),
		streaming: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_streaming",
			Help: "1 while this relay streams from the slot.",
		}),
		transactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_transactions_total",
			Help: "Committed transactions received from the slot (heartbeats included).",
		}),
		statusUpdates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_status_updates_total",
			Help: "Standby status updates sent to the server.",
		}),
		backpressureSec: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_backpressure_seconds_total",
			Help: "Time the relay stopped reading because the in-flight window was full.",
		}),
		kafkaReachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_cdc_kafka_reachable",
			Help: "1 while the brokers answer the relay's probes (and /readyz may report ready), 0 after a probe failed.",
		}),
		kafkaTxns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_cdc_kafka_transactions_total",
			Help: "Exactly-once mode: Kafka transactions ended, by result (committed, failed).",
		}, []string{"result"}),
		eosSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_cdc_eos_skipped_total",
			Help: "Exactly-once mode: events replayed by the slot and skipped because a committed Kafka transaction already holds them.",
		}),
	}
	for _, c := range []prometheus.Collector{
		m.published, m.publishedB, m.publishErrors, m.confirmedLSN, m.commitToAck, m.commitToRecv, m.slotLag, m.slotRetained,
		m.receivedLSN, m.inFlightEvents, m.inFlightBytes, m.sessions, m.sessionErrors,
		m.heartbeatsSent, m.heartbeatsSeen, m.rejected, m.ignored, m.standby, m.streaming,
		m.transactions, m.statusUpdates, m.backpressureSec, m.kafkaReachable,
		m.kafkaTxns, m.eosSkipped, m.produceRequestsCounter(),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.kafkaReachable.Set(1)
	// Present from the start so dashboards see the series before the first sample.
	m.slotLag.WithLabelValues(slot)
	m.slotRetained.WithLabelValues(slot)
	g, err := slots.NewGauges(reg)
	if err != nil {
		return nil, err
	}
	m.slotGauges = g
	return m, nil
}

// produceRequestsCounter reads the producers' request count from sarama's
// own metrics, so sending a request costs the relay nothing more.
func (m *metrics) produceRequestsCounter() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "eventforge_cdc_produce_requests_total",
		Help: "Produce requests sent to Kafka (the exactly-once mode's included); events published / requests is the records per request.",
	}, func() float64 { return float64(m.produceRequests.Count()) })
}

// commitToAckBuckets are 0.5 ms steps up to 10 ms, where a p99 target is
// judged, then coarser steps up to 10 minutes (a stalled broker).
func commitToAckBuckets() []float64 {
	b := prometheus.LinearBuckets(0.0005, 0.0005, 20) // 0.5 ms .. 10 ms
	return append(b, 0.0125, 0.015, 0.0175, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
		0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120, 300, 600)
}

package schemareg

import "github.com/prometheus/client_golang/prometheus"

// metrics of a registry client and its encoder (docs/metrics.md).
type metrics struct {
	requests *prometheus.CounterVec // by outcome: ok, not_found, unavailable
	seconds  prometheus.Histogram
	hits     prometheus.Counter
	rejected *prometheus.CounterVec // by topic
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_schema_registry_requests_total",
			Help: "Requests to the schema registry, by outcome: ok, not_found (an answer: no such subject, version or id) or unavailable (no answer, a timeout, a 5xx, 401, 403 or 429).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eventforge_schema_registry_request_seconds",
			Help:    "Duration of requests to the schema registry (cache misses).",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10},
		}),
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_schema_registry_cache_hits_total",
			Help: "Schema look-ups answered from the cache, without a request.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_cdc_schema_rejected_total",
			Help: "Events whose payload did not fit its schema (or had no schema to fit), by topic: set aside in outbox_rejected.",
		}, []string{"topic"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.seconds, m.hits, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Rejected is the counter of a topic's schema rejections.
func (r *Registry) Rejected(topic string) prometheus.Counter {
	return r.m.rejected.WithLabelValues(topic)
}

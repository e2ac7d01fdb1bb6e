package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus series. Labels are the route pattern and
// the status code: never an order id.
type metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	inFlight prometheus.Gauge
	orders   *prometheus.CounterVec

	authFailures prometheus.Counter
	panics       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_api_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventforge_api_request_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventforge_api_requests_in_flight",
			Help: "HTTP requests being answered.",
		}),
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventforge_api_orders_total",
			Help: "POST /orders outcomes: created, replayed (Idempotency-Key), duplicate, key_reused, invalid, failed.",
		}, []string{"result"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_api_auth_failures_total",
			Help: "Requests refused with 401 for a missing or wrong bearer token.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventforge_api_panics_total",
			Help: "Handler panics recovered into a 500 answer.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.seconds, m.inFlight, m.orders, m.authFailures, m.panics} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// instrument counts and times every request by the pattern that the mux
// matched (the mux sets r.Pattern on the request it is given).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		m.seconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusRecorder remembers the status code written through it.
type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

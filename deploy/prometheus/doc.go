// Package prometheus holds no Go code: it is EventForge's Prometheus
// configuration (prometheus.yml, rules/) and the tests that check it, the
// Grafana dashboard and docs/metrics.md with promtool and against the
// metrics the code registers.
//
// Imports (floor: shared library): nothing; it holds only tests.
package prometheus

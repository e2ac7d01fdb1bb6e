package kafka

import "github.com/rcrowley/go-metrics"

// recordsPerRequest is the go-metrics histogram sarama updates once for every
// produce request it encodes, with the number of records in the request.
const recordsPerRequest = "records-per-request"

// ProduceRequests counts the produce requests of the producers whose
// sarama.Config.MetricRegistry is its Registry: sarama updates its
// records-per-request histogram once per request sent, so the histogram's
// count is the number of requests. sarama unregisters what a broker
// connection registered when the connection closes; this registry keeps that
// histogram, so the count keeps growing across connections and clients (a
// relay's stream sessions) instead of starting again at zero.
type ProduceRequests struct {
	reg keepRegistry
}

// NewProduceRequests returns a counter with an empty registry.
func NewProduceRequests() *ProduceRequests {
	return &ProduceRequests{reg: keepRegistry{metrics.NewRegistry()}}
}

// Registry is the registry to set as sarama.Config.MetricRegistry of every
// producer counted; it holds sarama's other metrics as well.
func (p *ProduceRequests) Registry() metrics.Registry { return p.reg }

// Count is the number of produce requests sent so far.
func (p *ProduceRequests) Count() int64 {
	if h, ok := p.reg.Get(recordsPerRequest).(metrics.Histogram); ok {
		return h.Count()
	}
	return 0
}

// keepRegistry never unregisters the records-per-request histogram.
type keepRegistry struct {
	metrics.Registry
}

func (r keepRegistry) Unregister(name string) {
	if name != recordsPerRequest {
		r.Registry.Unregister(name)
	}
}

func (r keepRegistry) UnregisterAll() {
	var names []string
	r.Each(func(name string, _ any) { names = append(names, name) })
	for _, n := range names {
		r.Unregister(n)
	}
}

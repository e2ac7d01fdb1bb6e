package cdc

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	gometrics "github.com/rcrowley/go-metrics"
)

// TestProduceRequestsMetric: eventforge_cdc_produce_requests_total is the
// count of sarama's records-per-request histogram in the registry the
// producer sessions share, read at scrape time.
func TestProduceRequestsMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, "s")
	if err != nil {
		t.Fatal(err)
	}
	const head = "# HELP eventforge_cdc_produce_requests_total Produce requests sent to Kafka (the exactly-once mode's included); events published / requests is the records per request.\n" +
		"# TYPE eventforge_cdc_produce_requests_total counter\n"
	for _, c := range []struct {
		records []int64 // one produce request each
		want    string
	}{
		{nil, "0"},
		{[]int64{500, 12, 1}, "3"},
		{[]int64{7}, "4"},
	} {
		for _, n := range c.records {
			// What sarama does when it encodes a produce request.
			gometrics.GetOrRegisterHistogram("records-per-request", m.produceRequests.Registry(),
				gometrics.NewUniformSample(16)).Update(n)
		}
		want := head + "eventforge_cdc_produce_requests_total " + c.want + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "eventforge_cdc_produce_requests_total"); err != nil {
			t.Errorf("after %v: %v", c.records, err)
		}
	}
}

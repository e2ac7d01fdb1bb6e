package cdc

import (
	"testing"
	"time"
)

// TestProducerConfigTimeouts: the relay's producer, in both delivery
// modes, waits on a broker no longer than the configured Kafka timeouts
// (sarama's own 30 s read timeout held a frozen leader's partitions for
// 30 s), and the configured values win over the defaults.
func TestProducerConfigTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		eos                    bool
		request, produce, dial time.Duration
		wantRequest, wantProd  time.Duration
	}{
		{name: "defaults", wantRequest: 3 * time.Second, wantProd: 2 * time.Second},
		{name: "defaults exactly-once", eos: true, wantRequest: 3 * time.Second, wantProd: 2 * time.Second},
		{name: "set", request: 9 * time.Second, produce: 7 * time.Second, wantRequest: 9 * time.Second, wantProd: 7 * time.Second},
	} {
		c := validConfig()
		c.ExactlyOnce = tc.eos
		c.Kafka.Timeouts.Request, c.Kafka.Timeouts.Produce = tc.request, tc.produce
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sc, err := c.ProducerConfig()
		if err != nil {
			t.Fatal(err)
		}
		if sc.Net.ReadTimeout != tc.wantRequest || sc.Net.WriteTimeout != tc.wantRequest || sc.Producer.Timeout != tc.wantProd ||
			sc.Net.DialTimeout != 5*time.Second || sc.Metadata.Timeout != 15*time.Second {
			t.Errorf("%s: read %s write %s produce %s dial %s metadata %s", tc.name, sc.Net.ReadTimeout, sc.Net.WriteTimeout,
				sc.Producer.Timeout, sc.Net.DialTimeout, sc.Metadata.Timeout)
		}
		if err := sc.Validate(); err != nil {
			t.Errorf("%s: sarama rejects it: %v", tc.name, err)
		}
	}
	c := validConfig()
	c.Kafka.Timeouts.Produce = 4 * time.Second // the default request timeout is 3 s
	if err := c.Validate(); err == nil {
		t.Fatal("a produce timeout above the request timeout must be refused")
	}
}

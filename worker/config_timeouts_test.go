package worker

import (
	"testing"
	"time"
)

// TestConsumerTimeouts: the consumer group and the dead-letter producer
// wait on a broker no longer than Config.Kafka.Timeouts (not sarama's 30 s
// read timeout); the group's connections wait at least through a join the
// coordinator holds for its initial rebalance delay (3 s); and a failed
// fetch looks for the new leader within a second.
func TestConsumerTimeouts(t *testing.T) {
	for _, tc := range []struct {
		request               time.Duration
		wantConsumer, wantDLQ time.Duration
	}{
		{0, 5 * time.Second, 3 * time.Second},
		{4 * time.Second, 5 * time.Second, 4 * time.Second},
		{8 * time.Second, 8 * time.Second, 8 * time.Second},
	} {
		c := validConfig()
		c.Kafka.Timeouts.Request = tc.request
		c = c.withDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		cc, pc := c.consumerConfig(), c.producerConfig()
		if cc.Net.ReadTimeout != tc.wantConsumer || pc.Net.ReadTimeout != tc.wantDLQ {
			t.Errorf("request timeout %s: consumer read %s, dead-letter read %s; want %s and %s",
				tc.request, cc.Net.ReadTimeout, pc.Net.ReadTimeout, tc.wantConsumer, tc.wantDLQ)
		}
		if cc.Consumer.Retry.Backoff > time.Second {
			t.Errorf("a failed fetch waits %s before looking for the new leader", cc.Consumer.Retry.Backoff)
		}
		if err := cc.Validate(); err != nil {
			t.Error(err)
		}
	}
}

package worker

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestConsumerTimeouts: the fetches and the dead-letter producer wait on a
// broker no longer than Config.Kafka.Timeouts (not sarama's 30 s read
// timeout); the connections to the group coordinator wait at least through
// a join the coordinator holds for its initial rebalance delay (3 s) and
// while the other members finish their transaction in progress (up to
// ApplyTimeout, seen within a heartbeat); and a failed fetch looks for the
// new leader within a second.
func TestConsumerTimeouts(t *testing.T) {
	for _, tc := range []struct {
		request, apply       time.Duration
		wantFetch, wantCoord time.Duration
	}{
		{0, time.Second, 3 * time.Second, 5 * time.Second},
		{4 * time.Second, time.Second, 4 * time.Second, 5 * time.Second},
		{8 * time.Second, time.Second, 8 * time.Second, 8 * time.Second},
		{0, 0, 3 * time.Second, DefaultApplyTimeout + DefaultSessionTimeout/3 + 2*time.Second},
	} {
		c := validConfig()
		c.Kafka.Timeouts.Request = tc.request
		c.ApplyTimeout, c.SessionTimeout = tc.apply, 0
		if tc.apply != 0 {
			c.SessionTimeout = 3 * time.Second // with the apply timeout, a join waits 1+1+2 s
		}
		c = c.withDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		cc, co, pc := c.consumerConfig(), c.coordinatorConfig(), c.producerConfig()
		if cc.Net.ReadTimeout != tc.wantFetch || pc.Net.ReadTimeout != tc.wantFetch || co.Net.ReadTimeout != tc.wantCoord {
			t.Errorf("request timeout %s: fetch read %s, dead-letter read %s, coordinator read %s; want %s, %[5]s and %s",
				tc.request, cc.Net.ReadTimeout, pc.Net.ReadTimeout, co.Net.ReadTimeout, tc.wantFetch, tc.wantCoord)
		}
		if co.Consumer.Group.Session.Timeout != cc.Consumer.Group.Session.Timeout || co.Consumer.IsolationLevel != cc.Consumer.IsolationLevel {
			t.Error("the coordinator's configuration differs from the fetches' in more than the read timeout")
		}
		if cc.Consumer.Retry.Backoff > time.Second {
			t.Errorf("a failed fetch waits %s before looking for the new leader", cc.Consumer.Retry.Backoff)
		}
		for _, sc := range []*sarama.Config{cc, co} {
			if err := sc.Validate(); err != nil {
				t.Error(err)
			}
		}
	}
}

package worker

import (
	"testing"
	"time"
)

// TestConsumerTimeouts: the consumer group and the dead-letter producer
// wait on a broker no longer than Config.Kafka.Timeouts (not sarama's 30 s
// read timeout), and a failed
// fetch looks for the new leader within a second.
func TestConsumerTimeouts(t *testing.T) {
	for _, request := range []time.Duration{0, 8 * time.Second} {
		c := validConfig()
		c.Kafka.Timeouts.Request = request
		c = c.withDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		want := request
		if want == 0 {
			want = 5 * time.Second
		}
		cc, pc := c.consumerConfig(), c.producerConfig()
		for name, got := range map[string]time.Duration{
			"consumer read": cc.Net.ReadTimeout, "consumer write": cc.Net.WriteTimeout, "dead-letter read": pc.Net.ReadTimeout,
		} {
			if got != want {
				t.Errorf("request timeout %s: %s %s, want %s", request, name, got, want)
			}
		}
		if cc.Consumer.Retry.Backoff > time.Second {
			t.Errorf("a failed fetch waits %s before looking for the new leader", cc.Consumer.Retry.Backoff)
		}
		if hb := cc.Consumer.Group.Heartbeat.Interval; hb >= cc.Consumer.Group.Session.Timeout {
			t.Errorf("heartbeat %s does not fit in the session", hb)
		}
		if err := cc.Validate(); err != nil {
			t.Error(err)
		}
	}
}

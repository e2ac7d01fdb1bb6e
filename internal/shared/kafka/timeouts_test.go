package kafka_test

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// TestTimeoutsReachEveryClient: the defaults, not sarama's 30 s read
// timeout, bound every client's waits on a broker, and a set value wins.
func TestTimeoutsReachEveryClient(t *testing.T) {
	brokers := []string{"127.0.0.1:9092"}
	set := kafka.Timeouts{Dial: 2 * time.Second, Request: 7 * time.Second, Produce: 4 * time.Second, Metadata: 20 * time.Second}
	for _, tc := range []struct {
		name string
		t    kafka.Timeouts
		want kafka.Timeouts
	}{
		{"defaults", kafka.Timeouts{}, kafka.Timeouts{Dial: 5 * time.Second, Request: 3 * time.Second, Produce: 2 * time.Second, Metadata: 15 * time.Second}},
		{"set", set, set},
		{"partly set", kafka.Timeouts{Request: 9 * time.Second}, kafka.Timeouts{Dial: 5 * time.Second, Request: 9 * time.Second, Produce: 2 * time.Second, Metadata: 15 * time.Second}},
	} {
		c := kafka.Config{Brokers: brokers, Timeouts: tc.t}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", tc.name, err)
		}
		for client, sc := range map[string]*sarama.Config{"base": c.Base(), "producer": c.IdempotentProducer(kafka.ProducerOptions{})} {
			got := kafka.Timeouts{Dial: sc.Net.DialTimeout, Request: sc.Net.ReadTimeout, Produce: sc.Producer.Timeout, Metadata: sc.Metadata.Timeout}
			if got != tc.want || sc.Net.WriteTimeout != tc.want.Request {
				t.Errorf("%s %s: got %+v (write %s), want %+v", tc.name, client, got, sc.Net.WriteTimeout, tc.want)
			}
			if err := sc.Validate(); err != nil {
				t.Errorf("%s %s: sarama rejects it: %v", tc.name, client, err)
			}
		}
	}
}

func TestTimeoutsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		t       kafka.Timeouts
		wantErr []string
	}{
		{"zero", kafka.Timeouts{}, nil},
		{"negative", kafka.Timeouts{Dial: -1, Metadata: -time.Second},
			[]string{"Config.Kafka.Timeouts.Dial: -1ns: must be positive", "Config.Kafka.Timeouts.Metadata: -1s: must be positive"}},
		{"produce not below request", kafka.Timeouts{Request: 2 * time.Second},
			[]string{"Config.Kafka.Timeouts.Produce: 2s is not below the request timeout 2s"}},
		{"produce below a millisecond", kafka.Timeouts{Produce: time.Microsecond}, []string{"Kafka counts it in milliseconds"}},
	} {
		err := kafka.Config{Brokers: []string{"h:1"}, Timeouts: tc.t}.Validate()
		if len(tc.wantErr) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		for _, w := range tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: got %v, want %q", tc.name, err, w)
			}
		}
	}
}

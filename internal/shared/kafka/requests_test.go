package kafka

import (
	"testing"

	"github.com/IBM/sarama"
)

// TestProduceRequestsCount sends records one request at a time through
// sarama against a mock broker: the count is the number of produce
// requests, and it keeps growing when the first producer (and its broker
// connections, which unregister their metrics) closed and a second one
// sends with the same registry.
func TestProduceRequestsCount(t *testing.T) {
	mb := sarama.NewMockBroker(t, 1)
	defer mb.Close()
	mb.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": sarama.NewMockMetadataResponse(t).SetBroker(mb.Addr(), mb.BrokerID()).
			SetLeader("t", 0, mb.BrokerID()),
		"ProduceRequest": sarama.NewMockProduceResponse(t),
	})
	reqs := NewProduceRequests()
	if got := reqs.Count(); got != 0 {
		t.Fatalf("count before any request = %d", got)
	}
	send := func(n int) {
		sc := sarama.NewConfig()
		sc.Version = sarama.V2_1_0_0 // the mock answers these request versions
		sc.ApiVersionsRequest = false
		sc.Producer.Return.Successes = true
		sc.MetricRegistry = reqs.Registry()
		p, err := sarama.NewSyncProducer([]string{mb.Addr()}, sc)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("v")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ send, want int64 }{{3, 3}, {2, 5}} {
		send(int(c.send))
		if got, seen := reqs.Count(), produceRequests(mb); got != c.want || seen != c.want {
			t.Errorf("after %d more records: count %d, broker saw %d requests, want %d", c.send, got, seen, c.want)
		}
	}
}

// produceRequests is how many produce requests the mock broker received.
func produceRequests(mb *sarama.MockBroker) int64 {
	var n int64
	for _, rr := range mb.History() {
		if _, ok := rr.Request.(*sarama.ProduceRequest); ok {
			n++
		}
	}
	return n
}

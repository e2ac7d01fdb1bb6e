package kafka_test

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// lookupCluster is three mock brokers, ids 1 to 3: broker 1 answers
// nothing (frozen), brokers 2 and 3 answer metadata naming themselves the
// leader of partition 0 of topic "t", and version requests. The client is
// seeded with broker 2; its requests time out after timeout.
func lookupCluster(t *testing.T, timeout time.Duration) (sarama.Client, map[int32]*sarama.MockBroker) {
	t.Helper()
	mocks := map[int32]*sarama.MockBroker{}
	for id := int32(1); id <= 3; id++ {
		mocks[id] = sarama.NewMockBroker(t, id)
		t.Cleanup(mocks[id].Close)
	}
	for id := int32(2); id <= 3; id++ {
		md := sarama.NewMockMetadataResponse(t).SetController(2).SetLeader("t", 0, id)
		for bid, m := range mocks {
			md.SetBroker(m.Addr(), bid)
		}
		mocks[id].SetHandlerByMap(map[string]sarama.MockResponse{
			"MetadataRequest": md, "ApiVersionsRequest": sarama.NewMockApiVersionsResponse(t),
		})
	}
	sc := sarama.NewConfig()
	sc.Version = sarama.V2_8_0_0
	sc.ApiVersionsRequest = false
	sc.Net.ReadTimeout = timeout
	sc.Metadata.Retry.Max = 0
	client, err := sarama.NewClient([]string{mocks[2].Addr()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, mocks
}

// requests counts the requests of a kind a mock broker received, answered
// or not.
func requests[T any](b *sarama.MockBroker) int {
	n := 0
	for _, rr := range b.History() {
		if _, ok := rr.Request.(T); ok {
			n++
		}
	}
	return n
}

// TestLeaderLookupAsksAFrozenBrokerLast: a lookup skips the broker to
// avoid, goes on past one that does not answer, and asks that one last
// afterwards, so a later lookup costs no timeout.
func TestLeaderLookupAsksAFrozenBrokerLast(t *testing.T) {
	const timeout = 300 * time.Millisecond
	client, mocks := lookupCluster(t, timeout)
	l := kafka.NewLeaderLookup(client)

	began := time.Now()
	id, err := l.Leader("t", 0, 2) // broker 1, frozen, then broker 3
	if err != nil || id != 3 {
		t.Fatalf("Leader avoiding broker 2 = %d, %v; want 3 (broker 3's answer)", id, err)
	}
	if took := time.Since(began); took < timeout {
		t.Errorf("the first lookup took %v: it did not ask broker 1 first", took)
	}
	time.Sleep(250 * time.Millisecond) // the answer is stale
	began = time.Now()
	id, err = l.Leader("t", 0, kafka.NoBroker)
	if err != nil || id != 2 {
		t.Fatalf("Leader = %d, %v; want 2 (broker 2's answer)", id, err)
	}
	if took := time.Since(began); took >= timeout {
		t.Errorf("the second lookup took %v: it waited on the broker that failed", took)
	}
	if n := requests[*sarama.MetadataRequest](mocks[1]); n != 1 {
		t.Errorf("the frozen broker got %d metadata requests, want 1", n)
	}
	if n := requests[*sarama.MetadataRequest](mocks[2]); n != 2 { // the client's first one, then the lookup's
		t.Errorf("broker 2 got %d metadata requests, want 2", n)
	}
	if lid, _, ok := l.Latest("t", 0); !ok || lid != 2 {
		t.Errorf("Latest = %d, %v; want 2", lid, ok)
	}
}

// TestLeaderLookupAnswers: a broker that answers is told apart from a
// frozen one within the request timeout, and the result is kept a while.
func TestLeaderLookupAnswers(t *testing.T) {
	const timeout = 300 * time.Millisecond
	client, mocks := lookupCluster(t, timeout)
	l := kafka.NewLeaderLookup(client)
	for _, c := range []struct {
		id   int32
		want bool
	}{{1, false}, {2, true}, {1, false}} {
		b, err := client.Broker(c.id)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if got := l.Answers(b); got != c.want {
			t.Errorf("Answers(broker %d) = %v, want %v", c.id, got, c.want)
		}
		if took := time.Since(began); took > 2*timeout {
			t.Errorf("Answers(broker %d) took %v", c.id, took)
		}
	}
	if n := requests[*sarama.ApiVersionsRequest](mocks[1]); n != 1 {
		t.Errorf("the frozen broker was asked %d times, want once (the result is kept)", n)
	}
}

package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestGroupClientSkipsASilentLeader: the consumer group's fetch client
// hands out a partition's leader only while it answers, and the leader a
// broker names once the old one froze, without a refresh of its own
// metadata (which may wait on the frozen broker); a partition's offsets
// are asked of that leader too.
func TestGroupClientSkipsASilentLeader(t *testing.T) {
	const timeout = 300 * time.Millisecond
	mocks := map[int32]*sarama.MockBroker{}
	for id := int32(1); id <= 3; id++ {
		mocks[id] = sarama.NewMockBroker(t, id)
		t.Cleanup(mocks[id].Close)
	}
	// lead makes brokers 2 and 3 name id the leader of partition 0 of
	// "t"; broker 1 answers nothing.
	lead := func(id int32) {
		md := sarama.NewMockMetadataResponse(t).SetController(2).SetLeader("t", 0, id)
		for bid, m := range mocks {
			md.SetBroker(m.Addr(), bid)
		}
		for _, m := range []*sarama.MockBroker{mocks[2], mocks[3]} {
			m.SetHandlerByMap(map[string]sarama.MockResponse{
				"MetadataRequest": md, "ApiVersionsRequest": sarama.NewMockApiVersionsResponse(t),
				"OffsetRequest": sarama.NewMockOffsetResponse(t).SetOffset("t", 0, sarama.OffsetNewest, 42),
			})
		}
	}
	lead(1)
	sc := sarama.NewConfig()
	sc.Version = sarama.V2_8_0_0
	sc.ApiVersionsRequest = false
	sc.Net.ReadTimeout = timeout
	sc.Metadata.Retry.Max = 0
	c, err := newGroupClient([]string{mocks[2].Addr()}, sc, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	if err := c.RefreshMetadata("t"); err != nil {
		t.Fatal(err)
	}
	if b, _, err := c.LeaderAndEpoch("t", 0); !errors.Is(err, sarama.ErrLeaderNotAvailable) {
		t.Fatalf("LeaderAndEpoch with a silent leader = broker %d, %v; want ErrLeaderNotAvailable", idOf(b), err)
	}
	lead(3)
	time.Sleep(250 * time.Millisecond) // the lookup's answer is stale
	before := requests(mocks[2]) + requests(mocks[3])
	if err := c.RefreshMetadata("t"); err != nil {
		t.Fatal(err)
	}
	if n := requests(mocks[2]) + requests(mocks[3]) - before; n != 1 {
		t.Errorf("a refresh sent %d metadata requests, want 1 (the lookup's, not the client's)", n)
	}
	b, _, err := c.LeaderAndEpoch("t", 0)
	if err != nil || b.ID() != 3 {
		t.Fatalf("LeaderAndEpoch after the move = broker %d, %v; want broker 3", idOf(b), err)
	}
	if off, err := c.GetOffset("t", 0, sarama.OffsetNewest); err != nil || off != 42 {
		t.Errorf("GetOffset = %d, %v; want 42", off, err)
	}
	if n := requestsOf[*sarama.OffsetRequest](mocks[1]); n != 0 {
		t.Errorf("the frozen broker was asked for offsets %d times", n)
	}
}

// requests counts the metadata requests b received.
func requests(b *sarama.MockBroker) int { return requestsOf[*sarama.MetadataRequest](b) }

// requestsOf counts the requests of type T b received, answered or not.
func requestsOf[T any](b *sarama.MockBroker) int {
	n := 0
	for _, rr := range b.History() {
		if _, ok := rr.Request.(T); ok {
			n++
		}
	}
	return n
}

// idOf is b's id, -1 for none.
func idOf(b *sarama.Broker) int32 {
	if b == nil {
		return -1
	}
	return b.ID()
}

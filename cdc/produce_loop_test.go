package cdc

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/kafka"
)

// mockCluster is a one-broker sarama MockBroker leading partition 0 of
// topic; its produce requests get the responses of produce in turn (the
// last one repeats).
func mockCluster(t *testing.T, topic string, produce ...any) *sarama.MockBroker {
	t.Helper()
	b := sarama.NewMockBroker(t, 1)
	t.Cleanup(b.Close)
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": sarama.NewMockMetadataResponse(t).
			SetBroker(b.Addr(), b.BrokerID()).SetController(b.BrokerID()).SetLeader(topic, 0, b.BrokerID()),
		"InitProducerIDRequest": sarama.NewMockInitProducerIDResponse(t).SetProducerID(7),
		"ProduceRequest":        sarama.NewMockSequence(produce...),
	})
	return b
}

// mockProducer is the relay's idempotent producer against b.
func mockProducer(t *testing.T, b *sarama.MockBroker) sarama.AsyncProducer {
	t.Helper()
	cfg := Config{Kafka: kafka.Config{Brokers: []string{b.Addr()}}}.withDefaults()
	sc, err := cfg.producerConfig(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	sc.Version = sarama.V2_1_0_0 // the mock answers these request versions
	sc.ApiVersionsRequest = false
	sc.Metadata.Retry.Max = 1
	prod, err := sarama.NewAsyncProducer([]string{b.Addr()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	return prod
}

func produceRequests(b *sarama.MockBroker) int {
	n := 0
	for _, rr := range b.History() {
		if _, ok := rr.Request.(*sarama.ProduceRequest); ok {
			n++
		}
	}
	return n
}

// TestRecordBehindARefusedOneWaits reproduces the reorder a refused record
// caused: sarama bumps the epoch and sends the partition's next batch at
// once, so record B (same key) landed before A was sent again, and the log
// read B, A, B. Behind the key gate B is not in the producer until A is
// settled: B never reaches the broker before A is delivered or set aside.
func TestRecordBehindARefusedOneWaits(t *testing.T) {
	const topic = "orders"
	cases := []struct {
		err      sarama.KError
		want     []string // settlements, in order
		requests int      // produce requests the broker saw
		fatal    bool
	}{
		{sarama.ErrUnknown, []string{"delivered A", "delivered B"}, 3, false},
		{sarama.ErrOutOfOrderSequenceNumber, []string{"delivered A", "delivered B"}, 3, false},
		{sarama.ErrInvalidTimestamp, []string{"rejected A", "delivered B"}, 2, false},
		{sarama.ErrInvalidRecord, []string{"rejected A", "delivered B"}, 2, false},
		{sarama.ErrTopicAuthorizationFailed, nil, 1, true},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			b := mockCluster(t, topic, sarama.NewMockProduceResponse(t).SetError(topic, 0, c.err), sarama.NewMockProduceResponse(t))
			prod := mockProducer(t, b)
			var mu sync.Mutex
			var got []string
			note := func(what string, p *pending) {
				mu.Lock()
				defer mu.Unlock()
				v, _ := p.msg.Value.Encode()
				got = append(got, what+" "+string(v))
			}
			d := newDispatcher(prod, slog.New(slog.DiscardHandler), 16, dispatchHooks{
				admit:     func(context.Context, *pending) (bool, error) { return true, nil },
				delivered: func(p *pending) { note("delivered", p) },
				reject:    func(_ context.Context, p *pending) error { note("rejected", p); return nil },
				tooLarge:  func(context.Context, *pending, error) (string, error) { return "", errors.New("unexpected") },
				failed:    func(*pending, error) {},
			})
			var drainers sync.WaitGroup
			drainers.Add(2)
			go func() { defer drainers.Done(); d.successes() }()
			go func() { defer drainers.Done(); d.errors() }()
			in := make(chan *pending, 2)
			in <- testPending(topic, "k1", "A")
			in <- testPending(topic, "k1", "B")
			close(in)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := d.run(ctx, in, true)
			prod.AsyncClose()
			drainers.Wait()
			var fe *FatalError
			switch {
			case c.fatal && !errors.As(err, &fe):
				t.Fatalf("run = %v, want a FatalError", err)
			case !c.fatal && err != nil:
				t.Fatalf("run = %v", err)
			case ctx.Err() != nil:
				t.Fatal("timed out")
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("settled %v, want %v", got, c.want)
			}
			if n := produceRequests(b); n != c.requests {
				t.Errorf("%d produce requests, want %d (B must not be sent while A is unsettled)", n, c.requests)
			}
		})
	}
}

// testPending is a keyed record whose value is value.
func testPending(topic, key, value string) *pending {
	p := &pending{id: uuid.New()}
	p.msg = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value), Metadata: p}
	p.size = p.msg.ByteSize(recordVersion)
	return p
}

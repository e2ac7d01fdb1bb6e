package cdc

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/testenv"
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

// produced lists, per produce request the broker saw, the values of its
// records in order. sarama keeps a request's records unexported; the mock
// has decoded them, so they are read by reflection.
func produced(b *sarama.MockBroker) [][]string {
	var out [][]string
	for _, rr := range b.History() {
		req, ok := rr.Request.(*sarama.ProduceRequest)
		if !ok {
			continue
		}
		var values []string
		topics := reflect.ValueOf(req).Elem().FieldByName("records")
		for _, topic := range topics.MapKeys() {
			parts := topics.MapIndex(topic)
			for _, part := range parts.MapKeys() {
				batch := parts.MapIndex(part).FieldByName("RecordBatch")
				if batch.IsNil() {
					continue
				}
				recs := batch.Elem().FieldByName("Records")
				for i := range recs.Len() {
					values = append(values, string(recs.Index(i).Elem().FieldByName("Value").Bytes()))
				}
			}
		}
		out = append(out, values)
	}
	return out
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
		want     []string   // settlements, in order
		requests [][]string // the records of each produce request the broker saw
		fatal    bool
	}{
		{sarama.ErrUnknown, []string{"delivered A", "delivered B"}, [][]string{{"A"}, {"A"}, {"B"}}, false},
		{sarama.ErrOutOfOrderSequenceNumber, []string{"delivered A", "delivered B"}, [][]string{{"A"}, {"A"}, {"B"}}, false},
		{sarama.ErrInvalidTimestamp, []string{"rejected A", "delivered B"}, [][]string{{"A"}, {"B"}}, false},
		{sarama.ErrInvalidRecord, []string{"rejected A", "delivered B"}, [][]string{{"A"}, {"B"}}, false},
		{sarama.ErrTopicAuthorizationFailed, nil, [][]string{{"A"}}, true},
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
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := runAB(ctx, d, prod, topic)
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
			if got := produced(b); !slices.EqualFunc(got, c.requests, slices.Equal) {
				t.Errorf("produce requests %v, want %v (B must not be sent while A is unsettled)", got, c.requests)
			}
		})
	}
}

// runAB runs d on two records of one key, A then B, with both result
// channels drained, until both are settled; then it closes prod.
func runAB(ctx context.Context, d *dispatcher, prod sarama.AsyncProducer, topic string) error {
	var drainers sync.WaitGroup
	drainers.Add(2)
	go func() { defer drainers.Done(); d.successes() }()
	go func() { defer drainers.Done(); d.errors() }()
	in := make(chan *pending, 2)
	in <- testPending(topic, "k1", "A")
	in <- testPending(topic, "k1", "B")
	close(in)
	err := d.run(ctx, in, true)
	prod.AsyncClose()
	drainers.Wait()
	return err
}

// testPending is a keyed record whose value is value.
func testPending(topic, key, value string) *pending {
	p := &pending{id: uuid.New()}
	p.msg = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value), Metadata: p}
	p.size = p.msg.ByteSize(recordVersion)
	return p
}

// TestRepublishRetriesInPlaceBehindTheGate runs republish's producer side
// against a MockBroker that refuses the first record once: the record is
// sent again in place and the other record of its key only after it, so
// the run publishes both in three requests instead of stopping (its error
// handler used to end the run, leaving whatever sarama sent after the
// failed record in the log).
func TestRepublishRetriesInPlaceBehindTheGate(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	since := time.Now().Add(-time.Second)
	insertEvent(t, db, uuid.New(), "k1", 64)
	insertEvent(t, db, uuid.New(), "k1", 64)
	b := mockCluster(t, "orders", sarama.NewMockProduceResponse(t).SetError("orders", 0, sarama.ErrUnknown), sarama.NewMockProduceResponse(t))
	prod := mockProducer(t, b)
	cfg := testConfig(t, url, []string{b.Addr()})
	cfg.TopicPrefix = ""
	cfg = cfg.withDefaults()
	cat, err := checkMapping(context.Background(), db, cfg.Mapping)
	if err != nil {
		t.Fatal(err)
	}
	rp := &republisher{cfg: &cfg, cat: cat, side: db, log: slog.New(slog.DiscardHandler), maxBytes: 1 << 20}
	res, err := rp.run(context.Background(), connect(t, url), prod, outboxRange{since: since})
	if err != nil {
		t.Fatalf("run = %v", err)
	}
	if res.Published != 2 || res.Rejected != 0 {
		t.Fatalf("result %+v, want 2 published", res)
	}
	reqs := produced(b)
	if len(reqs) != 3 || len(reqs[0]) != 1 || !slices.Equal(reqs[0], reqs[1]) || slices.Equal(reqs[1], reqs[2]) {
		t.Fatalf("produce requests %v, want the refused record, it again, then the next of its key", reqs)
	}
}

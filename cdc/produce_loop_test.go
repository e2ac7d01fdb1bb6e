package cdc

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

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

// TestRepublishRetriesInPlace runs republish's producer side against a
// MockBroker that refuses the first request once: the same generation is
// sent again, and the run publishes both rows instead of stopping.
func TestRepublishRetriesInPlace(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	since := time.Now().Add(-time.Second)
	insertEvent(t, db, uuid.New(), "k1", 64)
	insertEvent(t, db, uuid.New(), "k1", 64)
	b := mockCluster(t, "orders", sarama.NewMockProduceResponse(t).SetError("orders", 0, sarama.ErrNotLeaderForPartition), sarama.NewMockProduceResponse(t))
	cfg := testConfig(t, url, []string{b.Addr()})
	cfg.TopicPrefix = ""
	cfg = cfg.withDefaults()
	sc, err := cfg.producerConfig(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	sc.Version = sarama.V2_1_0_0 // the mock answers these request versions
	sc.ApiVersionsRequest = false
	client, err := sarama.NewClient([]string{b.Addr()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cat, err := checkMapping(context.Background(), db, cfg.Mapping)
	if err != nil {
		t.Fatal(err)
	}
	rp := &republisher{cfg: &cfg, cat: cat, side: db, log: slog.New(slog.DiscardHandler), maxBytes: 1 << 20}
	res, err := rp.run(context.Background(), connect(t, url), client, sc, outboxRange{since: since})
	if err != nil {
		t.Fatalf("run = %v", err)
	}
	if res.Published != 2 || res.Rejected != 0 {
		t.Fatalf("result %+v, want 2 published", res)
	}
	var produces int
	for _, rr := range b.History() {
		if _, ok := rr.Request.(*sarama.ProduceRequest); ok {
			produces++
		}
	}
	if produces != 2 {
		t.Fatalf("%d produce requests, want 2: the refused generation, then it again", produces)
	}
}

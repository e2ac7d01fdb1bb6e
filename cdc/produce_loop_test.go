package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/cdc/outboxscan"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
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
	t.Parallel()
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
	res, err := rp.run(context.Background(), connect(t, url), client, sc, outboxscan.Range{Since: since})
	if err != nil {
		t.Fatalf("run = %v", err)
	}
	if res.Published != 2 || res.Rejected != 0 {
		t.Fatalf("result %+v, want 2 published", res)
	}
	// The refused generation is sent again unchanged: same first sequence
	// number, same records (the second row may ride with it, or follow).
	var batches []string
	for _, rr := range b.History() {
		if req, ok := rr.Request.(*sarama.ProduceRequest); ok {
			batches = append(batches, batchShape(req))
		}
	}
	if len(batches) < 2 || batches[0] != batches[1] {
		t.Fatalf("produce requests %q: want the refused generation, then it again", batches)
	}
}

// batchShape describes the record batches of req: partition, first
// sequence number and record count of each. sarama keeps a request's
// records unexported; the mock has decoded them, so they are read by
// reflection.
func batchShape(req *sarama.ProduceRequest) string {
	var out []string
	topics := reflect.ValueOf(req).Elem().FieldByName("records")
	for _, tk := range topics.MapKeys() {
		ps := topics.MapIndex(tk)
		for _, pk := range ps.MapKeys() {
			batch := ps.MapIndex(pk).FieldByName("RecordBatch").Elem()
			out = append(out, fmt.Sprintf("p%d@%d×%d", pk.Int(), batch.FieldByName("FirstSequence").Int(), batch.FieldByName("Records").Len()))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

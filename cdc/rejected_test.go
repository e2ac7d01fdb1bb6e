package cdc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestTooLargeRecordsAreRecordedAndSkipped covers docs/design.md#rejected-records both ways: a
// record over the relay's limit is recorded locally; one the broker refuses
// (the topic's limit was lowered underneath) is recorded after the relay
// learns the new limit. The stream goes on past both.
func TestTooLargeRecordsAreRecordedAndSkipped(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.MaxMessageBytes = 20000
	cfg.Compression = "none" // the broker checks compressed batches
	db := connect(t, url)
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	topic := cfg.TopicPrefix + "orders"

	insert := func(payloadBytes int) uuid.UUID {
		id := uuid.New()
		insertEvent(t, db, id, "k1", payloadBytes)
		return id
	}
	e1 := insert(100)
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, map[uuid.UUID]int{e1: 1}, 30*time.Second)

	e2 := insert(30000) // over --max-message-bytes
	e3 := insert(100)
	waitDistinct(t, col, map[uuid.UUID]int{e3: 1}, 30*time.Second)

	// Lower the topic's limit behind the relay's back: the broker refuses.
	admin, err := sarama.NewClusterAdmin(env.Brokers, kafka.Config{Brokers: env.Brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	v := "3000"
	if err := admin.AlterConfig(sarama.TopicResource, topic, map[string]*string{"max.message.bytes": &v}, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the broker applies topic configs asynchronously
	e4 := insert(6000)
	e5 := insert(100)
	// The broker refuses e4's record; e5 (same key) waits behind it in the
	// relay until e4 is recorded.
	rejected := map[uuid.UUID]string{}
	waitFor(t, 60*time.Second, "e4 in outbox_rejected", func() bool {
		clear(rejected)
		rows, err := db.Query(context.Background(), "SELECT event_id, reason, topic FROM outbox_rejected")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			var reason, tp string
			if err := rows.Scan(&id, &reason, &tp); err != nil {
				t.Fatal(err)
			}
			if tp != topic {
				t.Errorf("rejected row topic %q, want %q", tp, topic)
			}
			rejected[id] = reason
		}
		return rejected[e4] != ""
	})
	e6 := insert(100)
	waitDistinct(t, col, map[uuid.UUID]int{e5: 1, e6: 1}, 60*time.Second)
	if len(rejected) != 2 || rejected[e2] == "" || rejected[e4] == "" {
		t.Fatalf("outbox_rejected = %v, want exactly e2 %s and e4 %s", rejected, e2, e4)
	}
	if !strings.Contains(rejected[e2], "exceeds the limit of 20000") {
		t.Errorf("reason of e2: %q", rejected[e2])
	}
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		if id == e2.String() || id == e4.String() {
			t.Fatalf("rejected event %s reached Kafka", id)
		}
	}
	if n := metricValue(t, r, "eventforge_cdc_rejected_total"); n < 2 {
		t.Fatalf("eventforge_cdc_rejected_total = %v, want >= 2", n)
	}
	if n := metricValue(t, r, "eventforge_cdc_publish_errors_total"); n < 1 {
		t.Fatalf("eventforge_cdc_publish_errors_total = %v: the broker's refusal was not counted", n)
	}
	t.Logf("e2: %s; e4: %s", rejected[e2], rejected[e4])
}

package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestReadOnlyConsoleReadsARunningPipeline points a read-only console at a
// database and topic written by someone else, and follows one order's cards
// as its record is produced and its group commits the offset.
func TestReadOnlyConsoleReadsARunningPipeline(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := env.NewDatabase(t)
	topic, group := testenv.UniqueName("console")+".orders", testenv.UniqueName("group")
	if err := createTopics(env.Brokers, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteTopics(env.Brokers, topic) })

	cfg := DefaultConfig()
	cfg.PGURL, cfg.Kafka, cfg.Topic, cfg.Group, cfg.Slot = db, kafka.Config{Brokers: env.Brokers}, topic, group, "no_such_slot"
	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const id = "order-ro-1"
	states := func() [4]string {
		t.Helper()
		_, cards, err := c.Order(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return [4]string{cards.Order.State, cards.Outbox.State, cards.Effect.State, cards.Offset.State}
	}
	if got, want := states(), [4]string{"not-created", "not-written", "inbox-0", "not-published"}; got != want {
		t.Fatalf("before: %v, want %v", got, want)
	}

	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var eventID string
	err = conn.QueryRow(ctx, `WITH o AS (INSERT INTO orders (id, status) VALUES ($1, 'created'))
		INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'orders', $1, 'order.created', '{}') RETURNING event_id::text`, id).Scan(&eventID)
	if err != nil {
		t.Fatal(err)
	}
	partition, offset := produce(t, env.Brokers, topic, id, eventID)
	if got, want := states(), [4]string{"created", "written", "inbox-0", "not-committed"}; got != want {
		t.Fatalf("published: %v, want %v", got, want)
	}
	f, _, _ := c.Order(ctx, id)
	if f.Partition != partition || len(f.Records) != 1 || f.Records[0].Offset != offset || f.EventID != eventID {
		t.Fatalf("facts %+v, want partition %d offset %d event %s", f, partition, offset, eventID)
	}

	commitOffset(t, env.Brokers, group, topic, partition, offset+1)
	if _, err := conn.Exec(ctx, `UPDATE orders SET status = 'processed' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2)`, group, eventID); err != nil {
		t.Fatal(err)
	}
	if got, want := states(), [4]string{"processed", "written", "inbox-1", "committed"}; got != want {
		t.Fatalf("applied: %v, want %v", got, want)
	}

	s := c.obs.signals(ctx)
	if s.SlotLagBytes != nil || s.ConsumerLag == nil || *s.ConsumerLag != 0 || s.PublishErrors != nil {
		t.Fatalf("signals %+v: want no slot lag (no slot), consumer lag 0, no relay metrics", s)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/?order="+id, nil)
	req.Host = "localhost:8088"
	c.Handler().ServeHTTP(rec, req)
	if body := rec.Body.String(); !strings.Contains(body, `data-state="processed"`) || !strings.Contains(body, eventID) {
		t.Fatalf("the page does not show the order's state: %s", body)
	}
	checkTopology(t, c, partition, offset)
	checkPartitionTail(t, c, partition, offset, id, eventID)
}

// checkTopology: every partition of the topic, the one written holding the
// record with the group committed past it, no member (no worker runs), no
// slot and no dead-letter topic.
func checkTopology(t *testing.T, c *Console, partition int32, offset int64) {
	t.Helper()
	tp := c.Topology(context.Background())
	if len(tp.Partitions) != demoPartitions {
		t.Fatalf("%d partitions, want %d: %+v", len(tp.Partitions), demoPartitions, tp)
	}
	for _, p := range tp.Partitions {
		want := PartitionView{Partition: p.Partition, Committed: -1}
		if p.Partition == partition {
			want.HighWatermark, want.Committed = offset+1, offset+1
		}
		if p != want {
			t.Errorf("partition %+v, want %+v", p, want)
		}
	}
	if len(tp.Members) != 0 || tp.Slot.LagBytes != nil || len(tp.Errors) == 0 || tp.DLQ.Exists || tp.Rates.Published != nil {
		t.Errorf("topology %+v: want no member, no slot (reported as an error), no DLQ topic, no relay rate", tp)
	}
	if len(tp.Relays) != 1 || tp.Relays[0].State != "unknown" {
		t.Errorf("relays %+v: want one, unknown (no metrics address)", tp.Relays)
	}
}

// checkPartitionTail reads the partition's last records through the page's
// endpoint, and refuses partitions the topic lacks.
func checkPartitionTail(t *testing.T, c *Console, partition int32, offset int64, key, eventID string) {
	t.Helper()
	h := c.Handler()
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{fmt.Sprintf("p=%d", partition), 200, fmt.Sprintf(`"records":[{"offset":%d,"key":%q,"event_id":%q`, offset, key, eventID)},
		{fmt.Sprintf("p=%d", (partition+1)%demoPartitions), 200, `"records":[]`},
		{"p=99", 404, "no such partition"},
		{"p=x", 400, "want ?p="},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/api/partition?"+tc.query, nil)
		req.Host = "localhost:8088" // the console answers only its own names
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.query, rec.Code, rec.Body.String(), tc.code, tc.want)
		}
	}
}

func produce(t *testing.T, brokers []string, topic, key, eventID string) (int32, int64) {
	t.Helper()
	sc := kafka.Config{Brokers: brokers}.IdempotentProducer(kafka.ProducerOptions{})
	sc.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("{}"),
		Headers: []sarama.RecordHeader{{Key: []byte("event_id"), Value: []byte(eventID)}}})
	if err != nil {
		t.Fatal(err)
	}
	return part, off
}

func commitOffset(t *testing.T, brokers []string, group, topic string, p int32, next int64) {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		t.Fatal(err)
	}
	pom, err := om.ManagePartition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	pom.MarkOffset(next, "")
	om.Commit()
	pom.Close()
	if err := om.Close(); err != nil {
		t.Fatal(err)
	}
}

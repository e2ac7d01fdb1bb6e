package cdc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// insertEvent commits one outbox row of aggregate "orders" with a payload of
// about payloadBytes bytes.
func insertEvent(t testing.TB, db *pgx.Conn, id uuid.UUID, key string, payloadBytes int) {
	t.Helper()
	mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT $1, 'orders', $2, 'order.created', jsonb_build_object('blob',
			(SELECT coalesce(string_agg(md5(random()::text), ''), '') FROM generate_series(1, $3::int / 32)))`, id, key, payloadBytes)
}

// rejectedReason is the reason outbox_rejected holds for id, "" when none.
func rejectedReason(t testing.TB, db *pgx.Conn, id uuid.UUID) string {
	t.Helper()
	var reason string
	err := db.QueryRow(context.Background(), "SELECT reason FROM outbox_rejected WHERE event_id = $1", id).Scan(&reason)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return reason
}

// alterTopic sets one configuration entry of topic.
func alterTopic(t testing.TB, brokers []string, topic, name, value string) {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	err = admin.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		name: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the broker applies topic configs asynchronously
}

// firstEventThenStop starts a relay on a fresh database, publishes one
// event of key k1 and stops the relay: the topic exists (to be altered)
// and later rows are a backlog for the next relay.
func firstEventThenStop(t *testing.T, env *testenv.Env) (Config, *pgx.Conn, string, uuid.UUID, *collector) {
	t.Helper()
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	db := connect(t, url)
	topic := cfg.TopicPrefix + "orders"
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	first := uuid.New()
	insertEvent(t, db, first, "k1", 100)
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, map[uuid.UUID]int{first: 1}, 30*time.Second)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	return cfg, db, topic, first, col
}

// TestInvalidTimestampIsSetAside makes the broker refuse a record for good:
// the topic accepts timestamps at most 1 s old and the record's timestamp is
// its transaction's commit time, 3 s ago when the relay reads it. The relay
// records it in outbox_rejected with the broker's reason, confirms past it
// and goes on publishing in the same session, instead of restarting the
// session forever.
func TestInvalidTimestampIsSetAside(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	cfg, db, topic, _, col := firstEventThenStop(t, env)

	alterTopic(t, env.Brokers, topic, "message.timestamp.before.max.ms", "1000")
	e2 := uuid.New()
	insertEvent(t, db, e2, "k1", 100)
	afterE2 := currentLSN(t, db)
	time.Sleep(3 * time.Second) // e2's commit time is now older than the topic accepts

	r := startRelay(t, cfg)
	waitFor(t, 30*time.Second, "e2 in outbox_rejected", func() bool { return rejectedReason(t, db, e2) != "" })
	if reason := rejectedReason(t, db, e2); !strings.Contains(reason, "timestamp") {
		t.Errorf("reason %q does not give the broker's reason", reason)
	}
	waitFor(t, 30*time.Second, "slot confirmed past e2", func() bool { return slotConfirmed(t, db, cfg.Slot) >= afterE2 })

	alterTopic(t, env.Brokers, topic, "message.timestamp.before.max.ms", "9223372036854775807")
	e3 := uuid.New()
	insertEvent(t, db, e3, "k1", 100)
	waitDistinct(t, col, map[uuid.UUID]int{e3: 1}, 30*time.Second)
	for _, m := range col.records() {
		if id, _ := header(m, "event_id"); id == e2.String() {
			t.Fatal("the refused event reached Kafka")
		}
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Fatalf("%v sessions failed: the refusal restarted the session", n)
	}
	if n := metricValue(t, r, "eventforge_cdc_rejected_total"); n != 1 {
		t.Fatalf("eventforge_cdc_rejected_total = %v, want 1", n)
	}
}

// TestRejectedRowDoesNotHideALaterOneWithTheSameEventID sets a row aside,
// deletes it and inserts a new row with the same event id: the new row is
// another INSERT (another WAL position) and must be produced.
func TestRejectedRowDoesNotHideALaterOneWithTheSameEventID(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.MaxMessageBytes = 20000
	cfg.Compression = "none"
	db := connect(t, url)
	topic := cfg.TopicPrefix + "orders"
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	id := uuid.New()
	insertEvent(t, db, id, "k1", 30000) // over --max-message-bytes
	waitFor(t, 30*time.Second, "the row in outbox_rejected", func() bool { return rejectedReason(t, db, id) != "" })
	mustExec(t, db, "DELETE FROM outbox WHERE event_id = $1", id)
	insertEvent(t, db, id, "k1", 100)
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, map[uuid.UUID]int{id: 1}, 30*time.Second)
}

// TestOnlyTheRefusedRecordsOfABatchAreSetAside drains a backlog of one key
// (one partition, so its records travel in the same generations) whose
// first two records are older than the topic accepts and whose last two
// are not. The broker refuses the batch naming the old records: exactly
// those land in outbox_rejected, the others are published, in commit order,
// in the same session.
func TestOnlyTheRefusedRecordsOfABatchAreSetAside(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	cfg, db, topic, first, col := firstEventThenStop(t, env)

	alterTopic(t, env.Brokers, topic, "message.timestamp.before.max.ms", "10000")
	old := []uuid.UUID{uuid.New(), uuid.New()}
	for _, id := range old {
		insertEvent(t, db, id, "k1", 100)
	}
	time.Sleep(11 * time.Second) // their commit times are now older than the topic accepts
	fresh := []uuid.UUID{uuid.New(), uuid.New()}
	for _, id := range fresh {
		insertEvent(t, db, id, "k1", 100)
	}
	r := startRelay(t, cfg)
	waitDistinct(t, col, map[uuid.UUID]int{first: 1, fresh[0]: 1, fresh[1]: 1}, 30*time.Second)
	for _, id := range old {
		if reason := rejectedReason(t, db, id); !strings.Contains(reason, "timestamp") {
			t.Errorf("old event %s: reason %q, want the broker's timestamp refusal", id, reason)
		}
	}
	for _, id := range fresh {
		if reason := rejectedReason(t, db, id); reason != "" {
			t.Errorf("fresh event %s set aside: %s", id, reason)
		}
	}
	var order []string
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		if id == old[0].String() || id == old[1].String() {
			t.Fatalf("a refused event reached Kafka")
		}
		order = append(order, id)
	}
	if want := []string{first.String(), fresh[0].String(), fresh[1].String()}; !slices.Equal(order, want) {
		t.Errorf("topic holds %v, want %v", order, want)
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Fatalf("%v sessions failed: the refusal restarted the session", n)
	}
}

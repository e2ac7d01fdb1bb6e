package cdc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestTopicRefusal(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TopicPrefix = "team."
	tests := []struct {
		name, topic string
		allowed     []string
		want        string // substring of the reason; "" allowed
	}{
		{"ordinary topic", "team.orders", nil, ""},
		{"dead-letter topic", "team.orders.dlq", nil, "dead-letter topic"},
		{"dead-letter of another team", "other.orders.dlq", nil, "dead-letter topic"},
		{"position topic", "team.eventforge.positions", nil, "position topic"},
		{"another relay's position topic", "x.eventforge.positions", nil, "position topic"},
		{"internal topic", "__transaction_state", nil, "internal topics"},
		{"allowed by name", "team.orders", []string{"team.payments", "team.orders"}, ""},
		{"allowed by pattern", "team.orders", []string{"team.ord*"}, ""},
		{"not allowed", "team.payments", []string{"team.orders"}, "not in --allowed-topics"},
		{"pattern is anchored", "team.orders-x.y", []string{"team.orders"}, "not in --allowed-topics"},
		{"allow-list never opens a reserved name", "team.orders.dlq", []string{"team.*"}, "dead-letter topic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.AllowedTopics = tt.allowed
			got := c.topicRefusal(tt.topic)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("topicRefusal(%q) = %q, want %q", tt.topic, got, tt.want)
			}
		})
	}
}

func TestAllowedTopicsAreValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AllowedTopics = []string{"ok.*", "bad[", ""}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `invalid pattern "bad["`) || !strings.Contains(err.Error(), "Config.AllowedTopics: empty entry") {
		t.Fatalf("Validate = %v", err)
	}
}

// TestReservedNamesGoToOutboxRejected: rows that would write into a
// dead-letter or position topic, forge dead-letter or replay headers, or
// route outside --allowed-topics are set aside with their reason, each
// followed by a good event that is published: the stream goes on.
func TestReservedNamesGoToOutboxRejected(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.AllowedTopics = []string{cfg.TopicPrefix + "orders*"}
	orders, dlqTopic := cfg.TopicPrefix+"orders", cfg.TopicPrefix+"orders.dlq"
	// The dead-letter topic exists, as it does once a worker dead-lettered.
	createTopic(t, env.Brokers, dlqTopic, 1)
	createTopic(t, env.Brokers, orders, cfg.TopicPartitions)
	testenv.DeleteTopicsAtCleanup(t, env.Brokers, orders, dlqTopic, cfg.TopicPrefix+"payments", cfg.TopicPrefix+"eventforge.positions")
	db := connect(t, url)
	ctx := context.Background()

	rows := []struct {
		name, aggType, headers, reason string
	}{
		{"into the dead-letter topic", "orders.dlq", `{}`, "dead-letter topic"},
		{"into the dead-letter topic with a forged origin", "orders.dlq", `{"x-eventforge-original-topic": "victim"}`, "reserved header name"},
		{"forged original topic", "orders", `{"x-eventforge-original-topic": "victim"}`, "x-eventforge-original-topic"},
		{"forged replay mark, other case", "orders", `{"X-EventForge-Replay": "orders.dlq/0@0"}`, "X-EventForge-Replay"},
		{"forged attempts", "orders", `{"a": "b", "x-eventforge-attempts": "1"}`, "reserved header name"},
		{"into the position topic", "eventforge.positions", `{}`, "position topic"},
		{"outside the allow-list", "payments", `{}`, "not in --allowed-topics"},
	}
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	col := consume(t, env.Brokers, orders)
	insert := `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, 'k', 'e', '{"amount": 100000}', $3::jsonb)`
	want := map[uuid.UUID]int{}
	ids := make([]uuid.UUID, len(rows))
	for i, row := range rows {
		ids[i] = uuid.New()
		mustExec(t, db, insert, ids[i], row.aggType, row.headers)
		good := uuid.New()
		mustExec(t, db, insert, good, "orders", `{"h": "v"}`)
		want[good] = 1
	}
	end := currentLSN(t, db)
	waitDistinct(t, col, want, 60*time.Second)
	waitFor(t, 30*time.Second, "slot confirmed past the last write", func() bool { return slotConfirmed(t, db, cfg.Slot) >= end })

	for i, row := range rows {
		var topic, reason string
		if err := db.QueryRow(ctx, "SELECT topic, reason FROM outbox_rejected WHERE event_id = $1", ids[i]).Scan(&topic, &reason); err != nil {
			t.Errorf("%s: not in outbox_rejected: %v", row.name, err)
			continue
		}
		if !strings.Contains(reason, row.reason) || topic != cfg.TopicPrefix+row.aggType {
			t.Errorf("%s: rejected for %q on topic %q, want a reason with %q", row.name, reason, topic, row.reason)
		}
	}
	for _, m := range col.records() {
		for _, h := range m.Headers {
			if strings.HasPrefix(strings.ToLower(string(h.Key)), outbox.ReservedHeaderPrefix) {
				t.Errorf("a record in %s carries %s", orders, h.Key)
			}
		}
	}
	if n := testenv.RecordCount(t, env.Brokers, dlqTopic); n != 0 {
		t.Errorf("%d records in the dead-letter topic, want none", n)
	}
	if topicExists(t, env.Brokers, cfg.TopicPrefix+"payments") {
		t.Error("a topic outside --allowed-topics was created")
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Errorf("eventforge_cdc_session_errors_total = %v: a refused row restarted the session", n)
	}
}

package cdc

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// frozenBrokerBound is how soon after a broker freezes every partition must
// take records again: Kafka fences a silent broker after about 9 s and
// elects new leaders, and the relay, which asks the other brokers for a
// partition's leader instead of sending to the frozen one again, must
// follow within a few seconds (docs/operations.md#kafka-timeouts).
const frozenBrokerBound = 15 * time.Second

// TestLostLeaderHoldsNoPartition loses the broker that leads most
// partitions of a 3-node cluster under a steady writer, first frozen
// (SIGSTOP: its connections stay open, only timeouts end the waits), then
// killed: every partition takes events committed after the loss within
// frozenBrokerBound, the relay stays ready (its probe asks the other brokers
// on connections of its own), no committed event is lost and none is set
// aside.
func TestLostLeaderHoldsNoPartition(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	kc := testenv.StartKafkaCluster(t, 3)
	for _, loss := range []struct {
		name       string
		lose, back func(t testing.TB, id int)
	}{
		{"frozen", kc.Freeze, kc.Thaw},
		{"killed", kc.Kill, func(testing.TB, int) {}},
	} {
		t.Run(loss.name, func(t *testing.T) {
			lostLeader(t, env, kc, loss.lose, loss.back)
		})
	}
}

func lostLeader(t *testing.T, env *testenv.Env, kc *testenv.KafkaCluster, lose, back func(t testing.TB, id int)) {
	brokers := kc.Brokers()
	url := env.NewDatabase(t)
	db := connect(t, url)
	cfg := testConfig(t, url, brokers)
	cfg.TopicPartitions, cfg.TopicReplicationFactor, cfg.TopicMinInsyncReplicas = 6, 3, 2
	cfg.KafkaProbeInterval = 500 * time.Millisecond
	topic := cfg.TopicPrefix + "orders"
	admin := clusterAdmin(t, brokers)
	// The broker's append time: when a record reached its partition.
	appendTime := "LogAppendTime"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 3,
		ConfigEntries: map[string]*string{"message.timestamp.type": &appendTime}}, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.DeleteTopic(topic) })
	log, logs := logBuffer(t)
	r := startRelayLog(t, cfg, log)
	waitFor(t, 60*time.Second, "ready", func() bool { return r.ready(t.Context()) == nil })
	w := newWriter(t, db, 60)
	w.txn(60, false, true)
	col := consume(t, brokers, topic)
	waitDistinct(t, col, w.committed, 60*time.Second)

	leader := kc.BusiestLeader(t, topic)
	elected := kc.Elections(t, topic, leader)
	lose(t, leader)
	lost := time.Now()
	after := map[uuid.UUID]bool{} // committed after the loss
	unreachable := false
	for time.Since(lost) < frozenBrokerBound+5*time.Second {
		for _, id := range w.txn(12, false, true) {
			after[id] = true
		}
		unreachable = unreachable || metricValue(t, r, "eventforge_cdc_kafka_reachable") == 0
		time.Sleep(100 * time.Millisecond)
	}
	back(t, leader)
	waitDistinct(t, col, w.committed, 60*time.Second) // nothing lost
	resumed := map[int32]time.Duration{}
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		u, err := uuid.Parse(id)
		if err != nil || !after[u] {
			continue
		}
		if d, ok := resumed[m.Partition]; !ok || m.Timestamp.Sub(lost) < d {
			resumed[m.Partition] = m.Timestamp.Sub(lost)
		}
	}
	moved := map[int32]time.Duration{}
	for p, at := range elected() {
		moved[p] = at.Sub(lost)
	}
	t.Logf("lost broker %d; by partition, new leader named after the loss: %v; first event committed after it taken: %v", leader, moved, resumed)
	for p := range int32(6) {
		if d, ok := resumed[p]; !ok || d > frozenBrokerBound {
			t.Errorf("partition %d took events again %v after the loss (taken: %v), want within %s", p, d, ok, frozenBrokerBound)
		}
	}
	if unreachable || strings.Contains(logs.String(), "Kafka unreachable") {
		t.Errorf("the relay called Kafka unreachable while two brokers answered:\n%s", logs.String())
	}
	var setAside int
	if err := db.QueryRow(t.Context(), "SELECT count(*) FROM outbox_rejected").Scan(&setAside); err != nil || setAside != 0 {
		t.Errorf("%d events set aside (%v), want 0", setAside, err)
	}
}

func clusterAdmin(t testing.TB, brokers []string) sarama.ClusterAdmin {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

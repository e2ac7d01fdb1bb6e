package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

func TestLeftoversAreFoundByAgeAndDropped(t *testing.T) {
	t.Parallel()
	env := Shared(t)
	logDir, err := KafkaLogDir()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sarama.NewClusterAdmin(env.Brokers, kafka.Config{Brokers: env.Brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topic := UniqueName("left") + ".orders"
	DeleteTopicsAtCleanup(t, env.Brokers, topic)
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(env.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.Database
	time.Sleep(1100 * time.Millisecond) // file times: a second apart at least

	// In use within the last hour: neither is a leftover.
	recent, err := FindLeftovers(t.Context(), env, logDir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(recent.Topics, topic) || slices.Contains(recent.Databases, db) {
		t.Fatalf("created now, yet listed as unused for an hour: %+v", recent)
	}
	WaitFor(t, 20*time.Second, "the topic's partition folders", func() bool {
		l, err := FindLeftovers(t.Context(), env, logDir, time.Second)
		return err == nil && slices.Contains(l.Topics, topic) && slices.Contains(l.Databases, db)
	})
	// Only this test's names: FindLeftovers also sees what other tests left.
	if err := (Leftovers{Databases: []string{db}, Topics: []string{topic}}).Drop(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := connect(t, env.PGURL).QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil || exists {
		t.Fatalf("database %s still exists (%v)", db, err)
	}
	WaitFor(t, 20*time.Second, "the topic deleted", func() bool {
		topics, err := admin.ListTopics()
		_, ok := topics[topic]
		return err == nil && !ok
	})
}

func TestTestNames(t *testing.T) {
	for _, tc := range []struct {
		name            string
		database, topic bool
	}{
		{UniqueName("t"), true, true},
		{UniqueName("t") + ".orders", false, true},
		{UniqueName("wt") + ".dlq", false, true},
		{UniqueName("roles") + "_orders", false, true},
		{"eventforge", false, false},
		{"orders", false, false},
		{"hot1.orders", false, false},
		{"t_0123456789abc", false, false},
		{"__consumer_offsets", false, false},
	} {
		if got := testDatabaseName.MatchString(tc.name); got != tc.database {
			t.Errorf("%s: database name of a test = %v, want %v", tc.name, got, tc.database)
		}
		if got := testTopicName.MatchString(tc.name); got != tc.topic {
			t.Errorf("%s: topic name of a test = %v, want %v", tc.name, got, tc.topic)
		}
	}
}

func TestLeftoverBinariesByAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{"eventforge-test-1": 2 * time.Hour, "eventforge-test-2": time.Minute, "eventforge": 2 * time.Hour} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := leftoverBinaries(dir, now.Add(-30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "eventforge-test-1")}; !slices.Equal(got, want) {
		t.Errorf("leftoverBinaries = %v, want %v (only a test's binary, only an old one)", got, want)
	}
}

package cdc

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// testConfig is a relay configuration for one test: its own database, slot
// and topic prefix, and short intervals so tests run in seconds.
func testConfig(t testing.TB, pgURL string, brokers []string) Config {
	t.Helper()
	c := DefaultConfig()
	c.PGURL = pgURL
	c.Kafka = kafka.Config{Brokers: brokers, ClientID: "eventforge-cdc-test"}
	c.Slot = testenv.UniqueName("slot")
	c.TopicPrefix = testenv.UniqueName("t") + "."
	testenv.DeleteTopicsWithPrefixAtCleanup(t, brokers, c.TopicPrefix)
	c.TopicPartitions = 3
	c.StatusInterval = 300 * time.Millisecond
	c.HeartbeatInterval = -1
	c.SlotSampleInterval = 500 * time.Millisecond
	c.StateWriteInterval = 500 * time.Millisecond
	c.ReconnectMin = 200 * time.Millisecond
	c.ReconnectMax = 2 * time.Second
	c.StandbyRetry = 300 * time.Millisecond
	c.ShutdownTimeout = 10 * time.Second
	return c
}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("EVENTFORGE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("test", t.Name())
}

// running is a relay started by startRelay.
type running struct {
	*Relay
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// stop shuts the relay down as SIGTERM would and returns Run's result.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// waitFatal waits for the relay to stop on its own with a fatal error of
// kind, and returns that error.
func (r *running) waitFatal(t testing.TB, kind error) error {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not stop")
	}
	var fe *FatalError
	if !errors.As(r.err, &fe) || !errors.Is(r.err, kind) {
		t.Fatalf("Run = %v, want a fatal %v", r.err, kind)
	}
	return r.err
}

func startRelay(t testing.TB, cfg Config) *running {
	t.Helper()
	return startRelayLog(t, cfg, testLogger(t))
}

// startRelayLog is startRelay with the relay logging to log.
func startRelayLog(t testing.TB, cfg Config, log *slog.Logger) *running {
	t.Helper()
	reg := prometheus.NewRegistry()
	relay, err := New(cfg, log, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Relay: relay, reg: reg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = relay.Run(ctx)
	}()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// slotConfirmed is the slot's confirmed_flush_lsn (0 when there is none).
func slotConfirmed(t testing.TB, db *pgx.Conn, slot string) pglogrepl.LSN {
	t.Helper()
	var s *string
	err := db.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) || s == nil {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func currentLSN(t testing.TB, db *pgx.Conn) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// collector reads topics with an independent consumer from the oldest
// offset, keeping every record.
type collector struct {
	mu   sync.Mutex
	recs []*sarama.ConsumerMessage
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

func (c *collector) records() []*sarama.ConsumerMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*sarama.ConsumerMessage(nil), c.recs...)
}

// consume starts reading topic on every partition; the topic must exist
// (callers wait for the relay to create it).
func consume(t testing.TB, brokers []string, topic string) *collector {
	t.Helper()
	sc := kafka.Config{Brokers: brokers, ClientID: "eventforge-cdc-test-reader"}.Base()
	sc.Consumer.Return.Errors = false
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	c, err := sarama.NewConsumer(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	var parts []int32
	waitFor(t, 60*time.Second, "topic "+topic, func() bool {
		parts, err = c.Partitions(topic)
		return err == nil && len(parts) > 0
	})
	col := &collector{}
	var wg sync.WaitGroup
	var pcs []sarama.PartitionConsumer
	for _, p := range parts {
		var pc sarama.PartitionConsumer
		// A new topic's leaders reach the metadata shortly after it exists.
		waitFor(t, 30*time.Second, "leader of "+topic, func() bool {
			pc, err = c.ConsumePartition(topic, p, sarama.OffsetOldest)
			return err == nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range pc.Messages() {
				col.mu.Lock()
				col.recs = append(col.recs, m)
				col.mu.Unlock()
			}
		}()
		pcs = append(pcs, pc)
	}
	t.Cleanup(func() {
		for _, pc := range pcs {
			pc.AsyncClose()
		}
		c.Close()
		wg.Wait()
	})
	return col
}

// topicExists reports whether the broker knows topic.
func topicExists(t testing.TB, brokers []string, topic string) bool {
	t.Helper()
	sc := kafka.Config{Brokers: brokers}.Base()
	sc.Metadata.AllowAutoTopicCreation = false
	cl, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return false
	}
	defer cl.Close()
	ps, err := cl.Partitions(topic)
	return err == nil && len(ps) > 0
}

func header(m *sarama.ConsumerMessage, name string) (string, bool) {
	for _, h := range m.Headers {
		if string(h.Key) == name {
			return string(h.Value), true
		}
	}
	return "", false
}

func mustExec(t testing.TB, db *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func parseLSN(s string) (pglogrepl.LSN, error) { return pglogrepl.ParseLSN(s) }

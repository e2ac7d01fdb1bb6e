package cdc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// orderLoad writes single-row transactions (and now and then a small
// multi-row one) from a few writers, each owning its keys, so every key's
// commit order is the order its writer saw the commits succeed.
type orderLoad struct {
	mu      sync.Mutex
	byKey   map[string][]uuid.UUID // key -> committed event ids, in commit order
	order   []uuid.UUID            // every committed event in commit order (with one writer)
	ids     map[uuid.UUID]int      // every committed event (value unused)
	errs    []error
	writers int
	keys    int           // per writer
	pause   time.Duration // between a writer's transactions
}

func (l *orderLoad) committed(keys []string, ids []uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range keys {
		l.byKey[k] = append(l.byKey[k], ids[i])
		l.order = append(l.order, ids[i])
		l.ids[ids[i]] = 0
	}
}

// run writes until ctx ends; errors are kept for the test goroutine.
func (l *orderLoad) run(ctx context.Context, url string) { l.runWith(ctx, url, l.write) }

// runWith runs l.writers writers, each write(ctx, url, writer index), until
// ctx ends; errors are kept for the test goroutine.
func (l *orderLoad) runWith(ctx context.Context, url string, write func(context.Context, string, int) error) {
	var wg sync.WaitGroup
	for w := range l.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := write(ctx, url, w); err != nil {
				l.mu.Lock()
				l.errs = append(l.errs, err)
				l.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (l *orderLoad) write(ctx context.Context, url string, w int) error {
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	for seq := 0; ctx.Err() == nil; seq++ {
		n := 1
		if seq%50 == 49 {
			n = 10 // a multi-row transaction over several keys
		}
		ids, keys, seqs := make([]uuid.UUID, n), make([]string, n), make([]int, n)
		for i := range n {
			ids[i], keys[i], seqs[i] = uuid.New(), fmt.Sprintf("w%d-k%d", w, (seq+i*7)%l.keys), seq
		}
		// Autocommit: each statement is its own transaction, and once Exec
		// returns without error it has committed.
		if _, err := db.Exec(context.WithoutCancel(ctx), insertRows, ids, keys, seqs); err != nil {
			return fmt.Errorf("writer %d: %w", w, err)
		}
		l.committed(keys, ids)
		// A steady stream, not a flood: the broker's restart must not
		// starve for CPU on a small machine.
		select {
		case <-time.After(l.pause):
		case <-ctx.Done():
		}
	}
	return nil
}

// firstOccurrenceViolations reads records as the topic holds them (each
// partition in offset order; a key lives in one partition) and counts the
// keys whose first occurrences are not in commit order, with an example.
func firstOccurrenceViolations(byKey map[string][]uuid.UUID, got map[string][]uuid.UUID) (bad int, example string) {
	for key, want := range byKey {
		pos := make(map[uuid.UUID]int, len(want))
		for i, id := range want {
			pos[id] = i
		}
		seen := map[uuid.UUID]bool{}
		last := -1
		for _, id := range got[key] {
			if seen[id] {
				continue // a duplicate: only first occurrences count
			}
			seen[id] = true
			p, ok := pos[id]
			if !ok {
				continue
			}
			if p < last {
				bad++
				if example == "" {
					example = fmt.Sprintf("key %s: event #%d (%s) first appears after event #%d", key, p, id, last)
				}
				break
			}
			last = p
		}
	}
	return bad, example
}

// TestPerKeyOrderAcrossBrokerRestarts reproduces the bug the chaos run found
// (docs/design.md#produce-error-ends-session, #labelled-writes): while a relay streams many keys of single-row
// transactions to a private broker, the broker is killed and stopped
// mid-stream and started again. A send that failed must never be overtaken
// by records buffered behind it: read back by an independent consumer,
// every key's first occurrences are in commit order, and no committed event
// is missing.
func TestPerKeyOrderAcrossBrokerRestarts(t *testing.T) {
	t.Parallel() // mostly waits for a private broker to restart
	env := testenv.Shared(t)
	k := testenv.StartKafka(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, k.Brokers())
	cfg.TopicPartitions = 6
	topic := cfg.TopicPrefix + "orders"
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })

	// One writer: its commit order is the order across keys too.
	load := &orderLoad{byKey: map[string][]uuid.UUID{}, ids: map[uuid.UUID]int{}, writers: 1, keys: 300, pause: 2 * time.Millisecond}
	ctx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); load.run(ctx, url) }()
	t.Cleanup(func() { stopLoad(); <-loadDone })
	waitFor(t, 60*time.Second, "the relay's first records", func() bool { return topicRecords(t, k.Brokers(), topic) > 0 })

	// The relay keeps running through each outage: its producer retries,
	// and a JVM restart takes long enough that the first records used up
	// the old retry budget while later ones were still retrying.
	for i, hard := range []bool{true} {
		time.Sleep(2 * time.Second)
		began := time.Now()
		if hard {
			k.Kill(t)
		} else {
			k.Stop(t)
		}
		k.Start(t)
		t.Logf("fault %d (sigkill=%v): broker back after %s", i+1, hard, time.Since(began).Round(100*time.Millisecond))
	}
	time.Sleep(2 * time.Second)
	stopLoad()
	<-loadDone
	if len(load.errs) > 0 {
		t.Fatalf("load: %v", load.errs[0])
	}

	// An independent consumer reads the topic from its start until every
	// committed event is there (none lost).
	col := consume(t, k.Brokers(), topic)
	dups := waitDistinct(t, col, load.ids, 120*time.Second)
	got, gotByPartition := map[string][]uuid.UUID{}, map[string][]uuid.UUID{}
	for _, m := range col.records() {
		s, _ := header(m, "event_id")
		id, err := uuid.Parse(s)
		if err != nil {
			t.Fatalf("record without an event id: %q", s)
		}
		got[string(m.Key)] = append(got[string(m.Key)], id)
		gotByPartition[fmt.Sprint(m.Partition)] = append(gotByPartition[fmt.Sprint(m.Partition)], id)
	}
	if bad, example := firstOccurrenceViolations(byPartition(load, cfg.TopicPartitions), gotByPartition); bad > 0 {
		t.Errorf("%d partitions with first occurrences out of commit order across keys; %s", bad, example)
	}
	bad, example := firstOccurrenceViolations(load.byKey, got)
	t.Logf("%d committed events over %d keys, %d duplicates, %.0f produce errors, %.0f sessions",
		len(load.ids), len(load.byKey), dups,
		metricValue(t, r, "eventforge_cdc_publish_errors_total"), metricValue(t, r, "eventforge_cdc_sessions_total"))
	if bad > 0 {
		t.Fatalf("%d keys with first occurrences out of commit order; %s", bad, example)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestPartitionFollowsCommitOrder drains a backlog of many recurring keys
// written by one writer (so its commit order is known) into a topic of 3
// partitions: read back, every partition's first occurrences follow commit
// order across keys, not only per key, and every event is there.
func TestPartitionFollowsCommitOrder(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.TopicPartitions = 3
	topic := cfg.TopicPrefix + "orders"
	load := oneWriterBacklog(t, cfg, url)
	r := startRelay(t, cfg)
	col := consume(t, env.Brokers, topic)
	waitDistinct(t, col, load.ids, 60*time.Second)

	want := byPartition(load, 3)
	got := map[string][]uuid.UUID{}
	for _, m := range col.records() {
		s, _ := header(m, "event_id")
		got[fmt.Sprint(m.Partition)] = append(got[fmt.Sprint(m.Partition)], uuid.MustParse(s))
	}
	if bad, example := firstOccurrenceViolations(want, got); bad > 0 {
		t.Fatalf("%d partitions out of commit order across keys; %s", bad, example)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// byPartition is the commit order of a one-writer load's events per
// partition (named by number) of a topic of n partitions.
func byPartition(l *orderLoad, n int32) map[string][]uuid.UUID {
	key := map[uuid.UUID]string{}
	for k, ids := range l.byKey {
		for _, id := range ids {
			key[id] = k
		}
	}
	out := map[string][]uuid.UUID{}
	for _, id := range l.order {
		p := fmt.Sprint(kafka.PartitionForKey([]byte(key[id]), n))
		out[p] = append(out[p], id)
	}
	return out
}

// TestFirstOccurrenceViolations checks the order check itself.
func TestFirstOccurrenceViolations(t *testing.T) {
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	want := map[string][]uuid.UUID{"k": {a, b, c}}
	tests := []struct {
		name string
		got  []uuid.UUID
		bad  int
	}{
		{"in order", []uuid.UUID{a, b, c}, 0},
		{"duplicates replayed after", []uuid.UUID{a, b, a, b, c}, 0},
		{"missing one is not an order violation", []uuid.UUID{a, c}, 0},
		{"later lands ahead of a gap", []uuid.UUID{a, c, b}, 1},
		{"replay after a gap", []uuid.UUID{a, c, b, c}, 1},
		{"swapped first two", []uuid.UUID{b, a, c}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad, _ := firstOccurrenceViolations(want, map[string][]uuid.UUID{"k": tc.got})
			if bad != tc.bad {
				t.Fatalf("bad = %d, want %d", bad, tc.bad)
			}
		})
	}
}

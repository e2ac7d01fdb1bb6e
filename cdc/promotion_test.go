package cdc

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestPromotionResumes promotes the standby of a PostgreSQL 17 primary,
// stopped hard under a writer while the standby was standbyLag behind (the
// primary's walsender to it stopped): the transactions of those seconds
// are lost with the primary. The relay on a multi-host URL
// (target_session_attrs=read-write) resumes on the promoted server by
// itself, from the synced failover slot: every event of the surviving
// database reaches Kafka, none that it lacks does (the primary held the
// lost ones back from the relay until the standby had them), and
// relay_state on the promoted server holds no position of the old
// primary's. A second relay pointed at the standby alone waits for it to
// be promoted, trying every second without counting a session error.
func TestPromotionResumes(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	primary := testenv.StartPostgresVersion(t, failoverPG())
	standby := primary.StartStandby(t)
	cfg := testConfig(t, multiHost(t, primary.URL(), standby.URL()), env.Brokers)
	cfg.StandbyURL = standby.URL()
	cfg.FailoverCheckInterval = 300 * time.Millisecond
	cfg.HeartbeatInterval = 200 * time.Millisecond
	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	db := connect(t, primary.URL())
	w := newWriter(t, db, 10)
	w.txn(10, false, true)
	col := consume(t, env.Brokers, cfg.TopicPrefix+"orders")
	waitDistinct(t, col, w.committed, 60*time.Second)
	waitFor(t, 60*time.Second, "the slot protected", func() bool { return metricValue(t, r, "eventforge_slot_failover_ready") == 1 })

	onStandby := cfg
	onStandby.PGURL = standby.URL()
	log, logs := logBuffer(t)
	waiter := startRelayLog(t, onStandby, log)
	waitFor(t, 10*time.Second, "the waiter sees a standby", func() bool { return strings.Contains(logs.String(), "standby in recovery") })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written int
	wg.Add(1)
	go func() { defer wg.Done(); written = writeUntilFailure(primary.URL(), stop) }()
	time.Sleep(time.Second) // the standby streams what the writer commits
	lagFrom := time.Now()
	freezeWALSender(t, db)
	time.Sleep(2 * time.Second) // the waiter tries twice meanwhile
	if n := metricValue(t, waiter, "eventforge_cdc_session_errors_total"); n != 0 || waiter.ready(t.Context()) == nil {
		t.Errorf("the relay on the standby counted %v session errors while it waited for a primary (ready: %v)", n, waiter.ready(t.Context()))
	}
	if err := waiter.stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(lagFrom.Add(standbyLag)))
	errorsBefore := metricValue(t, r, "eventforge_cdc_session_errors_total")
	primary.Kill(t)
	close(stop)
	wg.Wait()
	sdb := connect(t, standby.URL())
	stateWatch := watchRelayState(t, standby.URL(), cfg.Slot, 10*time.Second)
	standby.Promote(t)
	promoted := time.Now()
	after := writeEvents(t, sdb, 20)
	var resumed time.Duration
	waitFor(t, 60*time.Second, "events written after the promotion", func() bool {
		for _, m := range col.records() {
			if id, _ := header(m, "event_id"); id == after[0].String() {
				resumed = time.Since(promoted)
				return true
			}
		}
		return false
	})
	surviving := outboxIDs(t, sdb)
	inKafka := map[string]int{}
	waitFor(t, 60*time.Second, "every surviving event in Kafka", func() bool {
		inKafka = map[string]int{}
		for _, m := range col.records() {
			id, _ := header(m, "event_id")
			inKafka[id]++
		}
		for id := range surviving {
			if inKafka[id] == 0 {
				return false
			}
		}
		return true
	})
	ghosts, dups := 0, 0
	for id, n := range inKafka {
		if !surviving[id] {
			ghosts++
		}
		dups += n - 1
	}
	lost := len(w.committed) + 2*written - (len(surviving) - len(after))
	t.Logf("promotion with the standby %s behind: %d events committed on the old primary never reached the standby; %d surviving events, %d in Kafka that the promoted server lacks, %d duplicates; first event written after the promotion read from Kafka %s after it",
		standbyLag, lost, len(surviving), ghosts, dups, resumed.Round(time.Millisecond))
	if lost == 0 {
		t.Error("the standby lost nothing with the old primary: the test did not put it behind")
	}
	if ghosts != 0 {
		t.Errorf("%d events in Kafka that the promoted server never had", ghosts)
	}
	if resumed > 5*time.Second {
		t.Errorf("the relay resumed %s after the promotion, want within 5s", resumed)
	}
	if bumped := <-stateWatch; bumped != "" {
		t.Error(bumped)
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total") - errorsBefore; n > 1 {
		// The stream that broke with the primary is one; no server to
		// connect to while the standby is promoted is none.
		t.Errorf("%v session errors since the primary was stopped, want at most 1", n)
	}
}

// watchRelayState reads the relay_state row of slot on the server at u
// every 50ms for d and reports (on the channel) a write that made it look
// confirmed later without moving its position: a position of another
// server written as confirmed now. "" when there was none.
func watchRelayState(t testing.TB, u, slot string, d time.Duration) <-chan string {
	t.Helper()
	db := connect(t, u)
	out := make(chan string, 1)
	go func() {
		var lsn, prevLSN string
		var at, prevAt time.Time
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			err := db.QueryRow(context.Background(), "SELECT confirmed_lsn::text, updated_at FROM relay_state WHERE slot_name = $1", slot).Scan(&lsn, &at)
			if err != nil {
				continue // the server restarts as it is promoted
			}
			if !prevAt.IsZero() && !at.Equal(prevAt) && lsn == prevLSN {
				out <- "relay_state " + lsn + " written again at " + at.String() + " without moving: a position of the old primary written as confirmed on the promoted server"
				return
			}
			prevLSN, prevAt = lsn, at
		}
		out <- ""
	}()
	return out
}

// multiHost joins two servers' URLs into one that reaches whichever is
// the primary.
func multiHost(t testing.TB, a, b string) string {
	t.Helper()
	ua, err := url.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	ub, err := url.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	ua.Host += "," + ub.Host
	q := ua.Query()
	q.Set("target_session_attrs", "read-write")
	ua.RawQuery = q.Encode()
	return ua.String()
}

// writeUntilFailure commits small transactions of two outbox rows on url
// until stop or the first error (the server went away), and returns how
// many it committed.
func writeUntilFailure(u string, stop <-chan struct{}) int {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return 0
	}
	defer c.Close(ctx)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return i
		default:
		}
		ids := []uuid.UUID{uuid.New(), uuid.New()}
		if _, err := c.Exec(ctx, insertRows, ids, []string{"k1", "k2"}, []int{i, i}); err != nil {
			return i
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// standbyLag is how far behind the standby is when its primary is lost.
const standbyLag = 5 * time.Second

// freezeWALSender stops (SIGSTOP) the primary's walsender of its streaming
// standby, that db is connected to: the standby receives nothing more, as
// behind a network that stalls, and the primary holds a failover slot's
// changes back meanwhile. A stopped walsender makes the primary's
// immediate shutdown wait for it (5 s, then SIGKILL).
func freezeWALSender(t testing.TB, db *pgx.Conn) {
	t.Helper()
	var pid int
	if err := db.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_type = 'physical' AND active").Scan(&pid); err != nil {
		t.Fatalf("the standby's walsender: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
}

// writeEvents commits n single-row transactions and returns their ids.
func writeEvents(t testing.TB, db *pgx.Conn, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
		if _, err := db.Exec(context.Background(), insertRows, []uuid.UUID{ids[i]}, []string{"k" + ids[i].String()[:2]}, []int{i}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// outboxIDs is the event_id of every outbox row of db.
func outboxIDs(t testing.TB, db *pgx.Conn) map[string]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT event_id::text FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

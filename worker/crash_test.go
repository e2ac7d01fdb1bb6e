package worker_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestWorkerCrashWindows SIGKILLs a worker process at each failure window
// of the apply path (internal/shared/failpoint), restarts it, and checks the
// durable outcome: every event applied exactly once, the dead letter
// produced, the offsets committed to the end.
func TestWorkerCrashWindows(t *testing.T) {
	const n = 30
	tests := []struct {
		point      string
		action     string
		missing    int // index of the event whose order does not exist; -1: none
		wantBefore int // inbox rows committed when the worker died
		minDupes   int // redelivered events the restarted worker must find in the inbox
	}{
		// The 5th transaction dies uncommitted: nothing of it survives.
		{failpoint.WorkerInsideTxBeforeCommit, "crash-after=5", -1, 4, 0},
		// The 5th transaction committed, its offset was never marked: it
		// comes again and is a duplicate.
		{failpoint.WorkerAfterCommitBeforeOffset, "crash-after=5", -1, 5, 1},
		// The dead letter of event 10 was never acked: its offset did not
		// move, so the event is retried and dead-lettered after the restart.
		{failpoint.WorkerAfterDLQProduceBeforeAck, "crash", 10, 10, 0},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.point, "/", "_"), func(t *testing.T) {
			t.Parallel() // most of each case is the group waiting out the dead member
			f := newFixture(t, 1)
			var ids []string
			var evs []*outbox.Event
			for i := range n {
				id := fmt.Sprintf("o-%02d", i)
				if i != tt.missing {
					ids = append(ids, id)
				}
				evs = append(evs, f.orderEvent(id))
			}
			f.insertOrders(t, ids...)
			produce(t, f.brokers, evs...)
			handlers := filepath.Join(t.TempDir(), "orders.yaml")
			if err := os.WriteFile(handlers, []byte(countingYAML), 0o600); err != nil {
				t.Fatal(err)
			}
			flags := []string{"--batch-size", "1", "--max-attempts", "2"}

			crashing := startWorkerEnv(t, f, handlers, "crashing", []string{failpoint.EnvVar + "=" + tt.point + "=" + tt.action}, flags...)
			err, ok := crashing.wait(60 * time.Second)
			if !ok {
				t.Fatal("the failpoint did not fire within 60s")
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("worker ended with %v, want SIGKILL", err)
			}
			if log, _ := os.ReadFile(crashing.log); !strings.Contains(string(log), "failpoint "+tt.point) {
				t.Fatalf("log does not show the failpoint:\n%s", log)
			}
			if before := f.count(t, `SELECT count(*) FROM processed_events`); before != tt.wantBefore {
				t.Errorf("%d inbox rows at the crash, want %d", before, tt.wantBefore)
			}

			addr := testenv.FreeAddr(t)
			startWorker(t, f, handlers, "restarted", append(flags, "--metrics-addr", addr)...)
			want := n
			if tt.missing >= 0 {
				want = n - 1
			}
			waitFor(t, 60*time.Second, "every offset committed", func() bool {
				return committed(t, f.brokers, f.group, f.topic, 0) == n
			})
			if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != want {
				t.Errorf("%d orders applied once, want %d", got, want)
			}
			if got := f.count(t, `SELECT count(*) FROM orders WHERE amount > 1`); got != 0 {
				t.Errorf("%d orders applied more than once", got)
			}
			if got := f.count(t, `SELECT count(*) FROM processed_events WHERE result = 'applied'`); got != want {
				t.Errorf("%d applied inbox rows, want %d", got, want)
			}
			if got := f.count(t, `SELECT count(*) FROM processed_events WHERE result = 'dlq'`); got != n-want {
				t.Errorf("%d dead-lettered inbox rows, want %d", got, n-want)
			}
			dupes := scrape(t, addr, `eventforge_worker_events_total{consumer="`+f.group+`",result="duplicate",topic="`+f.topic+`"}`)
			if dupes < float64(tt.minDupes) {
				t.Errorf("restarted worker saw %v duplicates, want at least %d", dupes, tt.minDupes)
			}
			if tt.missing >= 0 {
				ls := deadLetters(t, f.brokers, f.topic)
				if len(ls) != 1 || ls[0].EventID != evs[tt.missing].ID.String() || ls[0].OriginalOffset != int64(tt.missing) {
					t.Errorf("dead letters %+v, want one, of the missing order's event", ls)
				}
			} else if ls := deadLetters(t, f.brokers, f.topic); len(ls) != 0 {
				t.Errorf("%d dead letters, want none", len(ls))
			}
		})
	}
}

// scrape reads one sample of a worker's /metrics by its exact series text;
// 0 when absent.
func scrape(t *testing.T, addr, series string) float64 {
	t.Helper()
	var body []byte
	waitFor(t, 10*time.Second, "metrics served", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("series %s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

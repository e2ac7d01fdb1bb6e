package worker_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker/dlq"
)

// jsonLog collects the Runner's JSON log lines from its goroutines.
type jsonLog struct{ testenv.Buffer }

// lines decodes the JSON log lines written so far.
func (s *jsonLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// TestWorkerObservability: a failing event's retry and dead-letter log lines
// carry its event_id, aggregate_id and the traceparent its outbox row had;
// the dlq result exists at 0 before the first dead letter; the oldest
// dead-letter age rises with the dead letter and falls back to 0 once the
// event is replayed and applied.
func TestWorkerObservability(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ev := f.orderEvent("absent")
	ev.Headers = map[string]string{"traceparent": traceparent}

	logs := &jsonLog{}
	cfg := f.config()
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := start(t, cfg, f.pool, counting)
	dlqTopic := dlq.Topic(f.topic)

	if !r.present("eventforge_worker_events_total", "topic", f.topic, "result", resultDLQ) {
		t.Fatal(`eventforge_worker_events_total{result="dlq"} absent before the first dead letter`)
	}
	if !r.present("eventforge_worker_dlq_oldest_age_seconds", "topic", dlqTopic) || r.metric("eventforge_worker_dlq_oldest_age_seconds", "topic", dlqTopic) != 0 {
		t.Fatal("dead-letter age not at 0 before the first dead letter")
	}

	produce(t, f.brokers, ev)
	waitFor(t, 30*time.Second, "event dead-lettered", func() bool { return r.events(f.topic, resultDLQ) == 1 })
	if age := r.metric("eventforge_worker_dlq_oldest_age_seconds", "topic", dlqTopic); age <= 0 {
		t.Errorf("dead-letter age = %v after a dead letter, want > 0", age)
	}

	want := map[string]string{"event_id": ev.ID.String(), "aggregate_id": "absent", "traceparent": traceparent}
	for _, msg := range []string{"apply failed; retrying", "dead-lettered"} {
		found := 0
		for _, l := range logs.lines(t) {
			if l["msg"] != msg {
				continue
			}
			found++
			for k, v := range want {
				if l[k] != v {
					t.Errorf("%q line: %s = %v, want %q (line %v)", msg, k, l[k], v, l)
				}
			}
		}
		if found == 0 {
			t.Errorf("no %q line in the logs", msg)
		}
	}

	// A replay applied once the order exists clears it.
	f.insertOrders(t, "absent")
	replay(t, f)
	waitFor(t, 30*time.Second, "replayed event applied", func() bool { return r.events(f.topic, resultApplied) == 1 })
	if age := r.metric("eventforge_worker_dlq_oldest_age_seconds", "topic", dlqTopic); age != 0 {
		t.Errorf("dead-letter age = %v after the replay was applied, want 0", age)
	}
}

// present reports whether the runner exports series name with the labels.
func (r *running) present(name string, labels ...string) bool {
	mfs, err := r.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return true
			}
		}
	}
	return false
}

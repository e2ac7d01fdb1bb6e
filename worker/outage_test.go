package worker

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestOutageLogsOneLineAtEachEnd: partitions failing again and again during
// an outage write one WARN line when the first fails and one INFO line when
// the last recovers; everything between goes to DEBUG. Readiness reports the
// outage while it lasts.
func TestOutageLogsOneLineAtEachEnd(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock := time.Unix(1_700_000_000, 0)
	o := newOutage("database", log, func() time.Time { return clock })
	boom := errors.New("dial tcp: i/o timeout")

	o.ok("p0") // no outage: nothing
	if err := o.err(); err != nil {
		t.Fatalf("err() = %v before any failure", err)
	}
	// 50 partitions fail 10 times each over 25 s.
	for round := 0; round < 10; round++ {
		for p := 0; p < 50; p++ {
			o.fail(partitionKey(p), "partition waits for the database", boom, "partition", p)
		}
		clock = clock.Add(2500 * time.Millisecond)
	}
	if err := o.err(); err == nil || !strings.Contains(err.Error(), "50 waiting") || !errors.Is(err, boom) {
		t.Fatalf("err() = %v during the outage", err)
	}
	for p := 0; p < 49; p++ {
		o.ok(partitionKey(p))
	}
	if err := o.err(); err == nil || !strings.Contains(err.Error(), "1 waiting") {
		t.Fatalf("err() = %v with one partition still failing", err)
	}
	o.ok(partitionKey(49))
	o.ok(partitionKey(49))
	if err := o.err(); err != nil {
		t.Fatalf("err() = %v after the outage", err)
	}
	// A second outage logs again.
	o.fail("p1", "partition waits for the database", boom)
	o.ok("p1")

	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		level := strings.Fields(line)[1] // time=… level=…
		counts[level]++
		if level == "level=INFO" && !strings.Contains(line, "outage ended") {
			t.Errorf("unexpected INFO line %q", line)
		}
	}
	want := map[string]int{"level=WARN": 2, "level=INFO": 2, "level=DEBUG": 499}
	for level, n := range want {
		if counts[level] != n {
			t.Errorf("%d %s lines, want %d:\n%s", counts[level], level, n, buf.String())
		}
	}
	if !strings.Contains(buf.String(), "lasted=25s failures=500") {
		t.Errorf("the end line lacks the duration and count:\n%s", buf.String())
	}
}

func partitionKey(p int) string { return "t/" + string(rune('a'+p)) }

// TestOutagesReleaseRevokedPartition: a partition revoked while it waits
// does not keep the worker unready.
func TestOutagesReleaseRevokedPartition(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	o := &outages{}
	for _, p := range []**outage{&o.database, &o.schema, &o.dependency, &o.repeated, &o.kafka, &o.deadLetter, &o.registry} {
		*p = newOutage("x", log, time.Now)
	}
	boom := errors.New("boom")
	o.database.fail("t/0", "waits", boom)
	o.schema.fail("t/0", "waits", boom)
	o.deadLetter.fail("t/0", "waits", boom)
	o.registry.fail("t/0", "waits", boom)
	o.database.fail("t/1", "waits", boom)
	o.release("t/0")
	if err := o.err(); err == nil || !strings.Contains(err.Error(), "1 waiting") {
		t.Fatalf("err() = %v with t/1 still waiting", err)
	}
	o.release("t/1")
	if err := o.err(); err != nil {
		t.Fatalf("err() = %v after both partitions were revoked", err)
	}
}

// TestOutagesByKind: each kind that waits has its own cause, the label of
// eventforge_worker_outage_waiting.
func TestOutagesByKind(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry(), "c", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Logger: slog.New(slog.DiscardHandler)}
	o := newOutages(&cfg, m)
	for k, cause := range map[kind]string{
		kindUnavailable: causeDatabase, kindSchema: causeSchema,
		kindDependency: causeDependency, kindRepeated: causeRepeated,
	} {
		if !k.waits() {
			t.Errorf("%v does not wait", k)
		}
		if got := o.of(k).cause; got != cause {
			t.Errorf("outage of %v has cause %q, want %q", k, got, cause)
		}
	}
	for _, k := range []kind{kindTransient, kindPermanent, kindRejected} {
		if k.waits() {
			t.Errorf("%v waits", k)
		}
	}
}

// TestDeadStreak counts consecutive dead letters of one cause.
func TestDeadStreak(t *testing.T) {
	var d deadStreak
	refused := func(id string) error { return fmt.Errorf("notify %s: %w", id, errors.New("connection refused")) }
	d.add(refused("a"))
	d.add(refused("b"))
	if d.n != 2 || d.cause != causeOf(refused("c")) {
		t.Fatalf("after two refusals: %+v", d)
	}
	d.add(errors.New("quota exceeded"))
	if d.n != 1 {
		t.Fatalf("another cause did not start a new streak: %+v", d)
	}
}

package cdc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/tracing"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// insertTraced commits n outbox rows in one transaction, written in one
// trace by n writer spans (one a row), with extra headers when given. It
// returns each event's writer span context.
func insertTraced(t *testing.T, db *pgx.Conn, n int, extra string) map[string]trace.SpanContext {
	t.Helper()
	tid := trace.TraceID(uuid.New())
	out := map[string]trace.SpanContext{}
	tx, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for i := range n {
		var sid trace.SpanID
		copy(sid[:], uuid.New().NodeID())
		sid[7] = byte(i + 1)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
		id := uuid.New()
		headers := fmt.Sprintf(`{"traceparent": %q%s}`, tracing.FormatTraceparent(sc), extra)
		if _, err := tx.Exec(context.Background(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ($1, 'orders', $2, 'order.created', '{}', $3::jsonb)`, id, "k"+id.String()[:4], headers); err != nil {
			t.Fatal(err)
		}
		out[id.String()] = sc
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// sendSpanOf finds the ended span a record's traceparent names and checks
// it is the relay's send span to topic in its writer's trace: a child of
// the writer's span or linked to it.
func sendSpanOf(rec *tracetest.SpanRecorder, m *sarama.ConsumerMessage, writer trace.SpanContext, topic string) error {
	tp, _ := header(m, tracing.Traceparent)
	sc, ok := tracing.ParseTraceparent(tp)
	if !ok {
		return fmt.Errorf("record traceparent %q", tp)
	}
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() != sc.SpanID() {
			continue
		}
		if s.Name() != "send "+topic || s.SpanKind() != trace.SpanKindProducer || s.SpanContext().TraceID() != writer.TraceID() {
			return fmt.Errorf("span %q kind %v trace %s, want send %s in the writer's trace %s", s.Name(), s.SpanKind(), s.SpanContext().TraceID(), topic, writer.TraceID())
		}
		if s.Parent().SpanID() == writer.SpanID() {
			return nil
		}
		for _, l := range s.Links() {
			if l.SpanContext.SpanID() == writer.SpanID() {
				return nil
			}
		}
		return fmt.Errorf("span %s: parent %s, links %v; want the writer's span %s", s.Name(), s.Parent().SpanID(), s.Links(), writer.SpanID())
	}
	return fmt.Errorf("no ended span %s", sc.SpanID())
}

// checkSendSpans waits until every event of want (by event id) has a
// record that names its relay send span, ended (with copies of an event, one
// is enough: the recorder may have been reset since the others).
func checkSendSpans(t *testing.T, rec *tracetest.SpanRecorder, col *collector, want map[string]trace.SpanContext, topic, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		problems := map[string]error{}
		for id := range want {
			problems[id] = errors.New("no record")
		}
		for _, m := range col.records() {
			id, _ := header(m, "event_id")
			if writer, ok := want[id]; ok && problems[id] != nil {
				problems[id] = sendSpanOf(rec, m, writer, topic)
			}
		}
		for id, err := range problems {
			if err == nil {
				delete(problems, id)
			}
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: records without their send span: %v", path, problems)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSendSpansOnEveryProducePath: with tracing on (an in-memory recorder),
// the records the snapshot backfill, the stream, outbox republish and the
// exactly-once mode produce each name a relay send span in their writer's
// trace, and a row set aside in outbox_rejected gets an error span there.
func TestSendSpansOnEveryProducePath(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	rec := tracetest.NewSpanRecorder()
	defer tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()

	cfg := testConfig(t, url, env.Brokers)
	cfg.BackfillSince = time.Now().Add(-time.Hour)
	topic := cfg.TopicPrefix + "orders"
	since := time.Now()
	backfilled := insertTraced(t, db, 3, "") // before the slot: the backfill sends them
	r := startRelay(t, cfg)
	waitFor(t, 60*time.Second, "streaming", func() bool { return r.State() == stateStreaming })
	streamed := insertTraced(t, db, 2, "")
	refused := insertTraced(t, db, 1, `, "x-eventforge-own": "1"`) // a reserved header name: set aside
	col := consume(t, env.Brokers, topic)
	checkSendSpans(t, rec, col, backfilled, topic, "backfill")
	checkSendSpans(t, rec, col, streamed, topic, "stream")
	for id, writer := range refused {
		waitFor(t, 30*time.Second, "the refused row's error span", func() bool { return rejectedSpan(rec, id, writer) })
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	t.Run("republish", func(t *testing.T) {
		rec.Reset()
		cfg := cfg
		cfg.BackfillSince = time.Time{}
		res, err := Republish(context.Background(), cfg, since, time.Now(), testLogger(t))
		if err != nil || res.Published != 5 {
			t.Fatalf("Republish = %+v, %v; want 5 published", res, err)
		}
		all := map[string]trace.SpanContext{}
		for _, m := range []map[string]trace.SpanContext{backfilled, streamed} {
			for id, sc := range m {
				all[id] = sc
			}
		}
		checkSendSpans(t, rec, col, all, topic, "republish")
	})

	t.Run("exactly-once", func(t *testing.T) {
		rec.Reset()
		cfg := testConfig(t, url, env.Brokers)
		cfg.ExactlyOnce = true
		topic := cfg.TopicPrefix + "orders"
		r := startRelay(t, cfg)
		waitFor(t, 60*time.Second, "streaming", func() bool { return r.State() == stateStreaming })
		eos := insertTraced(t, db, 2, "")
		checkSendSpans(t, rec, consume(t, env.Brokers, topic), eos, topic, "exactly-once")
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// rejectedSpan reports whether the recorder holds the error span of event
// id, set aside, in its writer's trace.
func rejectedSpan(rec *tracetest.SpanRecorder, id string, writer trace.SpanContext) bool {
	for _, s := range rec.Ended() {
		if s.Status().Code != codes.Error || s.SpanContext().TraceID() != writer.TraceID() || s.Parent().SpanID() != writer.SpanID() {
			continue
		}
		for _, e := range s.Events() {
			if e.Name == tracing.EventRejected {
				return attrsOf(s.Attributes())["messaging.message.id"] == id
			}
		}
	}
	return false
}

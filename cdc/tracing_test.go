package cdc

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

const (
	rowTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rowUnsampledTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	rowTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	rowSpanID      = "00f067aa0ba902b7"
)

// tracedPending builds the pending event of an outbox row whose headers
// carry traceparent (none when empty), and passes it through s.traceSend as
// publish does.
func tracedPending(t *testing.T, s *stream, traceparent string, commit time.Time) *pending {
	t.Helper()
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-1", EventType: "order.created",
		Payload: []byte(`{}`), CommitTime: commit}
	if traceparent != "" {
		e.Headers = map[string]string{tracing.Traceparent: traceparent}
	}
	p := &pending{id: e.ID, lsn: 0x1234, commit: commit}
	if err := outbox.NewBuilder("").Build(&p.rec, e); err != nil {
		t.Fatal(err)
	}
	s.traceSend(e, p)
	p.msg = &p.rec.Msg
	return p
}

func recordHeader(p *pending, key string) string {
	for _, h := range p.msg.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

// record turns tracing on with an in-memory recorder; a batch's span ends
// at its last ack, without the idle grace (internal/shared/tracing tests
// that).
func record(t *testing.T) (*tracetest.SpanRecorder, func()) {
	rec := tracetest.NewSpanRecorder()
	off := tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	restore := tracing.SetIdleGrace(0)
	return rec, func() { restore(); off() }
}

func attrsOf(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, a := range kvs {
		m[a.Key] = a.Value.String()
	}
	return m
}

func ackWith(hist prometheus.Histogram, p *pending, partition int32, offset int64) {
	p.record() // as the produce engine sees it
	p.msg.Partition, p.out.Offset = partition, offset
	(&producerSession{m: &metrics{commitToAck: hist}}).ackObserved(p)
}

func newHist() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "c2a", Buckets: []float64{10}})
}

func exemplarTrace(t *testing.T, hist prometheus.Histogram) string {
	t.Helper()
	var m dto.Metric
	_ = hist.Write(&m)
	if ex := m.GetHistogram().GetBucket()[0].GetExemplar(); ex != nil {
		return ex.GetLabel()[0].GetValue()
	}
	return ""
}

// A row with a sampled traceparent: the relay's send span is a child of
// the row's span, starts at the commit, ends on the ack, carries the
// messaging attributes, and the record's traceparent names it.
func TestSendSpanContinuesTheRowsTraceAndEndsOnAck(t *testing.T) {
	rec, off := record(t)
	defer off()
	commit := time.Now().Add(-1500 * time.Millisecond)
	p := tracedPending(t, &stream{}, rowTraceparent, commit)
	tp := recordHeader(p, tracing.Traceparent)
	hist := newHist()
	ackWith(hist, p, 3, 17)

	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	s := ended[0]
	if tp != tracing.FormatTraceparent(s.SpanContext()) {
		t.Errorf("record traceparent %q, want the send span's %q", tp, tracing.FormatTraceparent(s.SpanContext()))
	}
	if s.Parent().SpanID().String() != rowSpanID || s.SpanContext().TraceID().String() != rowTraceID {
		t.Errorf("parent %v, want the row's span", s.Parent())
	}
	if s.SpanKind() != trace.SpanKindProducer || s.Name() != "send orders" {
		t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
	}
	if !s.StartTime().Equal(commit) || s.EndTime().Sub(s.StartTime()) < 1500*time.Millisecond {
		t.Errorf("span %v..%v, want it to start at the commit %v", s.StartTime(), s.EndTime(), commit)
	}
	attrs := attrsOf(s.Attributes())
	for k, v := range map[attribute.Key]string{"messaging.system": "kafka", "messaging.destination.name": "orders",
		"messaging.operation.name": "send", "messaging.message.id": p.id.String(),
		"messaging.destination.partition.id": "3", "messaging.kafka.offset": "17", "messaging.batch.message_count": "1",
		"messaging.kafka.message.key": "o-1"} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if attrs[tracing.AttrCommitToAck] == "" {
		t.Error("no commit→ack attribute")
	}
	if l := s.Links(); len(l) != 0 {
		t.Errorf("links %+v, want none: the row's span is the parent", l)
	}
	if got := exemplarTrace(t, hist); got != rowTraceID {
		t.Errorf("commit→ack exemplar %q, want trace %s", got, rowTraceID)
	}
}

// Rows of one trace in flight together share a send span, which links to
// the writer spans other than its parent; rows of another trace get their
// own, in their own trace.
func TestRowsOfOneTraceShareASendSpanAndOthersGetTheirOwn(t *testing.T) {
	rec, off := record(t)
	defer off()
	const sibling = "00-" + rowTraceID + "-b7ad6b7169203331-01"
	const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	s := &stream{}
	ps := []*pending{tracedPending(t, s, rowTraceparent, time.Now()), tracedPending(t, s, sibling, time.Now()),
		tracedPending(t, s, rowTraceparent, time.Now()), tracedPending(t, s, other, time.Now())}
	for i, p := range ps {
		ackWith(newHist(), p, 0, int64(i))
	}
	byTrace := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		byTrace[sp.SpanContext().TraceID().String()] = sp
	}
	mine, theirs := byTrace[rowTraceID], byTrace["0af7651916cd43dd8448eb211c80319c"]
	if len(rec.Ended()) != 2 || mine == nil || theirs == nil {
		t.Fatalf("spans %v, want one per trace", rec.Ended())
	}
	if attrsOf(mine.Attributes())["messaging.batch.message_count"] != "3" || attrsOf(theirs.Attributes())["messaging.batch.message_count"] != "1" {
		t.Errorf("counts %v and %v, want 3 and 1", attrsOf(mine.Attributes()), attrsOf(theirs.Attributes()))
	}
	l := mine.Links()
	if len(l) != 1 || l[0].SpanContext.SpanID().String() != "b7ad6b7169203331" || attrsOf(l[0].Attributes)["messaging.message.id"] != ps[1].id.String() {
		t.Errorf("links %+v, want one to the sibling row's span naming its event", l)
	}
	for i, p := range ps[:3] {
		if recordHeader(p, tracing.Traceparent) != tracing.FormatTraceparent(mine.SpanContext()) {
			t.Errorf("record %d: traceparent %q, want the shared span's", i, recordHeader(p, tracing.Traceparent))
		}
	}
}

// Rows without a traceparent that are in flight together share one send
// span, a root, whose traceparent their records carry; it ends with the
// last of them, and a record that comes later starts a new span.
func TestRowsInFlightTogetherShareOneSendSpan(t *testing.T) {
	rec, off := record(t)
	defer off()
	s := &stream{}
	var ps []*pending
	for range 5 {
		ps = append(ps, tracedPending(t, s, "", time.Now()))
	}
	hist := newHist()
	for i, p := range ps {
		if recordHeader(p, tracing.Traceparent) != recordHeader(ps[0], tracing.Traceparent) {
			t.Fatalf("record %d: traceparent %q, want the first record's", i, recordHeader(p, tracing.Traceparent))
		}
		ackWith(hist, p, int32(i%2), int64(i))
		if n := len(rec.Ended()); (i < 4 && n != 0) || (i == 4 && n != 1) {
			t.Fatalf("after %d acks %d spans ended", i+1, n)
		}
	}
	span := rec.Ended()[0]
	if span.Parent().IsValid() || recordHeader(ps[0], tracing.Traceparent) != tracing.FormatTraceparent(span.SpanContext()) {
		t.Errorf("span parent %v, records' traceparent %q: want a root the records name", span.Parent(), recordHeader(ps[0], tracing.Traceparent))
	}
	attrs := attrsOf(span.Attributes())
	if attrs["messaging.batch.message_count"] != "5" || attrs["messaging.destination.partition.id"] != "" || attrs["messaging.message.id"] != "" {
		t.Errorf("attributes %v, want 5 records over two partitions, no single message id", attrs)
	}
	if got := exemplarTrace(t, hist); got != span.SpanContext().TraceID().String() {
		t.Errorf("exemplar %q, want the batch's trace", got)
	}
	after := tracedPending(t, s, "", time.Now())
	if recordHeader(after, tracing.Traceparent) == recordHeader(ps[0], tracing.Traceparent) {
		t.Error("a record joined a batch whose records were all acked")
	}
}

func TestASendSpanCoversAtMostMaxBatchRecords(t *testing.T) {
	_, off := record(t)
	defer off()
	s := &stream{}
	first := tracedPending(t, s, rowTraceparent, time.Now())
	var last *pending
	for range tracing.MaxBatch {
		last = tracedPending(t, s, rowTraceparent, time.Now())
	}
	if recordHeader(last, tracing.Traceparent) == recordHeader(first, tracing.Traceparent) {
		t.Fatalf("record %d of a writer's trace shares the first record's span", tracing.MaxBatch+1)
	}
	first = tracedPending(t, s, "", time.Now())
	for range tracing.MaxRootBatch - 1 {
		last = tracedPending(t, s, "", time.Now())
	}
	if recordHeader(last, tracing.Traceparent) != recordHeader(first, tracing.Traceparent) {
		t.Fatalf("record %d without a traceparent has a span of its own", tracing.MaxRootBatch)
	}
	if last = tracedPending(t, s, "", time.Now()); recordHeader(last, tracing.Traceparent) == recordHeader(first, tracing.Traceparent) {
		t.Fatalf("record %d without a traceparent shares the first record's span", tracing.MaxRootBatch+1)
	}
}

// A writer's unsampled trace stays unsampled: the record passes unchanged.
func TestNoSendSpanForAnUnsampledWritersRow(t *testing.T) {
	rec, off := record(t)
	defer off()
	p := tracedPending(t, &stream{}, rowUnsampledTP, time.Now())
	if p.rec.Trace != nil || recordHeader(p, tracing.Traceparent) != rowUnsampledTP {
		t.Fatalf("trace %v, headers %v; want the row's unchanged", p.rec.Trace, p.msg.Headers)
	}
	ackWith(newHist(), p, 0, 1)
	if n := len(rec.Started()); n != 0 {
		t.Errorf("%d spans started", n)
	}
}

// TestUnsampledRowsWithoutTraceparentGetNone: at a sampling ratio, a row
// without a traceparent whose event the sampler leaves out (SampleRoot) gets
// no send span and no traceparent: the worker, with the same sampler,
// leaves it out from its event id alone. The rows it samples share one
// send span while in flight, in the first one's own trace, and carry it.
func TestUnsampledRowsWithoutTraceparentGetNone(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sampling := tracing.Sampling{Name: tracing.SamplerParentBasedTraceIDRatio, Ratio: 0.5}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampling.Sampler()), sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(rec))
	defer tracing.UseSampled(tp, sampling)()
	defer tracing.SetIdleGrace(0)()
	s := &stream{}
	var first *pending
	var sampled []*pending
	for range 200 {
		p := tracedPending(t, s, "", time.Now())
		tp := recordHeader(p, tracing.Traceparent)
		if want := tracing.SampleRoot(p.id); (tp != "") != want || (p.rec.Trace != nil) != want {
			t.Fatalf("event %s: traceparent %q, send span %v; sampled %v", p.id, tp, p.rec.Trace != nil, want)
		}
		if tp == "" {
			if len(p.msg.Headers) != 3 {
				t.Fatalf("an unsampled record's headers %v, want the contract's three", p.msg.Headers)
			}
			continue
		}
		if first == nil {
			first = p
		}
		if sc, _ := tracing.ParseTraceparent(tp); sc.TraceID() != tracing.RootTraceID(first.id) || !sc.IsSampled() {
			t.Fatalf("a sampled record's traceparent %s, want the trace of the first sampled event %s", tp, tracing.RootTraceID(first.id))
		}
		sampled = append(sampled, p)
	}
	if len(sampled) < 60 || len(sampled) > 140 {
		t.Fatalf("%d of 200 rows sampled at 0.5", len(sampled))
	}
	for _, p := range sampled {
		ackWith(newHist(), p, 0, 1)
	}
	if ended := rec.Ended(); len(ended) != 1 || attrsOf(ended[0].Attributes())["messaging.batch.message_count"] != strconv.Itoa(len(sampled)) {
		t.Fatalf("%d send spans ended, want one of the %d sampled records", len(ended), len(sampled))
	}
}

func TestNoSendSpanWhenTracingIsOff(t *testing.T) {
	p := tracedPending(t, &stream{}, rowTraceparent, time.Now())
	if p.rec.Trace != nil || recordHeader(p, tracing.Traceparent) != rowTraceparent || len(p.msg.Headers) != 4 {
		t.Fatalf("tracing off: trace %v, headers %v; want none and the row's", p.rec.Trace, p.msg.Headers)
	}
	hist := newHist()
	ackWith(hist, p, 0, 1)
	var m dto.Metric
	_ = hist.Write(&m)
	if m.GetHistogram().GetSampleCount() != 1 || m.GetHistogram().GetBucket()[0].GetExemplar() != nil {
		t.Errorf("histogram %v, want one observation without exemplar", m.GetHistogram())
	}
}

// A record set aside in outbox_rejected gets a send span of its own with
// the reason (a child of its batch's, in the row's trace), and leaves its
// batch, whose span then ends with the others.
func TestARejectedRecordGetsAnErrorSpanAndLeavesItsBatch(t *testing.T) {
	rec, off := record(t)
	defer off()
	s := &stream{}
	kept := tracedPending(t, s, rowTraceparent, time.Now())
	refused := tracedPending(t, s, rowTraceparent, time.Now())
	refused.reason = "the broker refused it"
	traceRejected(refused)
	ackWith(newHist(), kept, 0, 1)

	var send, rejected sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Status().Code == codes.Error {
			rejected = sp
		} else {
			send = sp
		}
	}
	if send == nil || rejected == nil {
		t.Fatalf("spans %v: want the batch's and the rejected record's", rec.Ended())
	}
	if attrsOf(send.Attributes())["messaging.batch.message_count"] != "1" {
		t.Errorf("batch attributes %v, want one record acked", attrsOf(send.Attributes()))
	}
	ev := rejected.Events()
	if rejected.Parent().SpanID() != send.SpanContext().SpanID() || len(ev) != 1 || ev[0].Name != tracing.EventRejected ||
		attrsOf(ev[0].Attributes)[tracing.AttrReason] != refused.reason ||
		attrsOf(rejected.Attributes())["messaging.message.id"] != refused.id.String() {
		t.Errorf("rejected span: parent %v, events %+v, attributes %v", rejected.Parent(), ev, attrsOf(rejected.Attributes()))
	}
}

// A record set aside before it was sent (never in a batch) still gets its
// span when its trace is sampled.
func TestARecordSetAsideBeforeSendingGetsAnErrorSpan(t *testing.T) {
	rec, off := record(t)
	defer off()
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", Headers: map[string]string{tracing.Traceparent: rowTraceparent}}
	p := &pending{id: e.ID, reason: "over the size limit"}
	p.rec.Msg.Topic = "orders"
	(&stream{}).traceSend(e, p) // publish's call: a set-aside record joins no batch
	p.msg = &p.rec.Msg
	if p.rec.Trace != nil {
		t.Fatal("a set-aside record joined a batch")
	}
	traceRejected(p)
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Status().Code != codes.Error || ended[0].Parent().SpanID().String() != rowSpanID {
		t.Fatalf("spans %v, want one error span under the row's", ended)
	}
}

// A record that comes while the others of its batch are in flight joins
// it, acks between notwithstanding: a drain fills its spans.
func TestARecordJoinsWhileItsBatchHasRecordsInFlight(t *testing.T) {
	rec, off := record(t)
	defer off()
	s := &stream{}
	first, second := tracedPending(t, s, "", time.Now()), tracedPending(t, s, "", time.Now())
	ackWith(newHist(), first, 0, 1)
	third := tracedPending(t, s, "", time.Now())
	if recordHeader(third, tracing.Traceparent) != recordHeader(first, tracing.Traceparent) {
		t.Fatal("a record joined a new batch while its predecessor's had one in flight")
	}
	ackWith(newHist(), second, 0, 2)
	ackWith(newHist(), third, 0, 3)
	if ended := rec.Ended(); len(ended) != 1 || attrsOf(ended[0].Attributes())["messaging.batch.message_count"] != "3" {
		t.Fatalf("spans %v, want one of 3 records", ended)
	}
}

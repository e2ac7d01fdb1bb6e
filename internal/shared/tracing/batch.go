package tracing

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// MaxBatch is the most records one send span of a writer's trace covers:
// the SDK's default limit of links per span (each record but the first
// links to its writer's span).
const MaxBatch = 128

// MaxRootBatch is the most records one root send span covers: rows without
// a traceparent, which add no links. Larger than MaxBatch so a drain pays a
// span per thousand records, not per hundred.
const MaxRootBatch = 1024

// DefaultIdleGrace is how long a batch whose records were all settled stays
// open for more records of its topic and trace before its span ends (at the
// last settling's time): records read in a trickle then still share spans,
// instead of a span each few records.
const DefaultIdleGrace = 5 * time.Millisecond

// idleGrace is the current grace, in nanoseconds (SetIdleGrace).
var idleGrace atomic.Int64

func init() { idleGrace.Store(int64(DefaultIdleGrace)) }

// SetIdleGrace sets how long a batch whose records were all settled waits
// for more before its span ends; 0 ends it at once. It returns a function
// that restores the previous grace: for tests, which check a span right
// after its last ack.
func SetIdleGrace(d time.Duration) (restore func()) {
	old := idleGrace.Swap(int64(d))
	return func() { idleGrace.Store(old) }
}

// Attributes of a send span beyond the messaging conventions.
const (
	AttrCommitToAck = "eventforge.commit_to_ack_seconds"
	AttrReason      = "eventforge.reason"
	attrBatchCount  = "messaging.batch.message_count"
	attrPartition   = "messaging.destination.partition.id"
	attrOffset      = "messaging.kafka.offset"
	attrMessageID   = "messaging.message.id"
	attrKey         = "messaging.kafka.message.key"
)

// EventRejected names the span event of a record set aside instead of sent.
const EventRejected = "outbox_rejected"

// producerKind is the option of every producer span, made once.
var producerKind = trace.WithSpanKind(trace.SpanKindProducer)

// Batch is one producer span ("send <topic>") over the records of one
// trace that a producer sent together: up to MaxBatch records of one topic,
// each joining while some of the others were still in flight or within the
// idle grace after the last of them settled. It starts at its first
// record's commit and ends at the last settling of its records (reported
// once the grace passed with no more joining, or at once when it is full),
// so a record's commit→ack time lies within it. The records' traceparent names
// it, so each consumer's span is its child, in the same trace.
//
// The trace is the writer's when the outbox row carried a sampled
// traceparent: the span is then a child of the first record's writer span
// and links to the writer spans of the others. Rows without one that the
// sampler samples (SampleRoot) share root spans, in the trace of the first
// one's event (RootTraceID); the others get no span and no traceparent.
// Records join a batch in one goroutine (a Batcher's); settling them is
// safe from any goroutine.
type Batch struct {
	span      trace.Span
	sc        trace.SpanContext
	parent    trace.SpanID // the first record's writer span, when there is one
	recording bool
	header    []byte               // traceparent of span: shared by the records, never written
	state     []byte               // tracestate of span, nil when empty
	joined    int                  // records taken: the Batcher's goroutine only
	limit     int                  // most records: MaxBatch, or MaxRootBatch for a root
	first     time.Time            // the first record's commit time
	linkAttrs []attribute.KeyValue // the links' attributes: the Batcher's goroutine only

	// open counts the records joined and not yet settled; closedMark once
	// the span ended (no record joins after that). full is set once
	// limit records joined.
	open atomic.Int32
	full atomic.Bool

	// What the span's end reports: kept only while recording.
	mu       sync.Mutex
	acked    int
	partSeen int32
	parts    int // distinct partitions seen, counted up to 2
	slowest  float64
	exemplar float64     // commit→ack seconds of the last record given the exemplar
	last     Ack         // of the latest record, its Key dropped: the caller may reuse it
	firstKey string      // the first record's key: a span of one record reports it
	hasKey   bool        // firstKey is set (a record without a key has none)
	idleAt   time.Time   // when its records were last all settled: the span's end
	timer    *time.Timer // ends the span once idle for the grace
}

// closedMark is Batch.open of a batch whose records were all settled.
const closedMark = math.MinInt32

// Ack is a record's acknowledgment by the broker, for its batch.
type Ack struct {
	ID        uuid.UUID
	Key       sarama.Encoder // the record's key, nil for none; not kept after Acked returns
	Partition int32
	Offset    int64   // -1 when the broker did not return one
	Seconds   float64 // commit→ack
}

// Batcher hands out the open batch of each topic and trace. Not safe for
// concurrent use: one goroutine builds the records.
type Batcher struct {
	open map[batchKey]*Batch
	// last is the batch of the previous record and its key: a drain's
	// records mostly go to the batch of the one before.
	last    *Batch
	lastKey batchKey
}

// batchKey is a topic and a writer's trace (zero for rows without one).
type batchKey struct {
	topic string
	trace trace.TraceID
}

// maxOpenBatches bounds a Batcher's memory of open batches: past it, it
// forgets them all (they still end once their records are settled). Rows of
// distinct traces, one batch each, would otherwise grow it without end.
const maxOpenBatches = 64

// Join adds the record of event id to topic, committed at commit, to the
// open batch of its writer's trace (writer, invalid when the row had no
// traceparent) or to a new one, and returns it; nil when the record gets no
// relay span: its writer's trace is not sampled, or, without a writer, the
// sampler does not sample the event's own trace (SampleRoot).
func (b *Batcher) Join(writer trace.SpanContext, id uuid.UUID, topic string, commit time.Time) *Batch {
	if writer.IsValid() && !writer.IsSampled() || !writer.IsValid() && !SampleRoot(id) {
		return nil
	}
	k := batchKey{topic, writer.TraceID()}
	cur := b.last
	if cur == nil || k != b.lastKey {
		if b.open == nil || len(b.open) >= maxOpenBatches {
			b.open = make(map[batchKey]*Batch, maxOpenBatches)
		}
		cur = b.open[k]
	}
	if cur != nil && cur.join(commit) {
		if cur.recording && writer.IsValid() && writer.SpanID() != cur.parent {
			cur.link(writer, id)
		}
	} else {
		cur = startBatch(writer, id, topic, commit)
		cur.join(commit)
		b.open[k] = cur
	}
	b.last, b.lastKey = cur, k
	return cur
}

// link links the span to the writer span of the record of event id. The
// links' attributes share one array of the batch instead of a slice each.
func (bt *Batch) link(writer trace.SpanContext, id uuid.UUID) {
	if bt.linkAttrs == nil {
		bt.linkAttrs = make([]attribute.KeyValue, 0, MaxBatch)
	}
	n := len(bt.linkAttrs)
	bt.linkAttrs = append(bt.linkAttrs, attribute.String(attrMessageID, id.String()))
	bt.span.AddLink(trace.Link{SpanContext: writer, Attributes: bt.linkAttrs[n : n+1 : n+1]})
}

// startSend starts a send span to topic, a child of writer when it is
// valid (else the root of event id's own trace, RootTraceID), at the commit
// when there is one.
func startSend(writer trace.SpanContext, id uuid.UUID, topic string, commit time.Time) trace.Span {
	ctx := context.Background()
	if writer.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, writer)
	} else {
		ctx = WithRootTrace(ctx, id)
	}
	start := time.Now()
	if !commit.IsZero() && commit.Before(start) {
		start = commit
	}
	_, span := Tracer().Start(ctx, "send "+topic, producerKind, trace.WithTimestamp(start))
	return span
}

func startBatch(writer trace.SpanContext, id uuid.UUID, topic string, commit time.Time) *Batch {
	span := startSend(writer, id, topic, commit)
	sc := span.SpanContext()
	bt := &Batch{span: span, sc: sc, parent: writer.SpanID(), recording: span.IsRecording(),
		header: appendTraceparent(make([]byte, 0, traceparentLen), sc), partSeen: -1, limit: MaxBatch, first: commit}
	if !writer.IsValid() {
		bt.limit = MaxRootBatch
	}
	if ts := sc.TraceState().String(); ts != "" {
		bt.state = []byte(ts)
	}
	if bt.recording {
		span.SetAttributes(Messaging(OpSend, topic, "")[:4]...) // no message id: set at the end for one record
	}
	return bt
}

// join takes one more record, committed at commit, unless the batch is
// full or its span ended. An unsampled batch's span records nothing and
// needs no end: it takes its records by count and commit time alone,
// without counting them in flight.
func (bt *Batch) join(commit time.Time) bool {
	if bt.joined >= bt.limit {
		return false
	}
	if !bt.recording {
		if !commit.IsZero() && commit.Sub(bt.first) > unsampledSpread {
			return false
		}
		bt.joined++
		return true
	}
	for {
		o := bt.open.Load()
		if o < 0 {
			return false
		}
		if bt.open.CompareAndSwap(o, o+1) {
			if bt.joined++; bt.joined == bt.limit {
				bt.full.Store(true)
			}
			return true
		}
	}
}

// SpanContext is the span context of the batch's span.
func (bt *Batch) SpanContext() trace.SpanContext { return bt.sc }

// Mark makes the batch's span the record's traceparent (and tracestate),
// with values shared by the batch's records.
func (bt *Batch) Mark(headers []sarama.RecordHeader) []sarama.RecordHeader {
	headers = setHeader(headers, keyTraceparent, bt.header)
	if bt.state != nil {
		return setHeader(headers, keyTracestate, bt.state)
	}
	return dropHeader(headers, Tracestate)
}

// Acked settles a record the broker acknowledged. It returns the span
// context to give its commit→ack observation as exemplar: the batch's, when
// sampled, for its first acknowledged record and for any later one at least
// twice as slow as the last that had it (so each histogram bucket a batch
// reaches can get one, at a few exemplars a batch); else an invalid one.
func (bt *Batch) Acked(a Ack) trace.SpanContext {
	var ex bool
	if bt.recording {
		bt.mu.Lock()
		bt.acked++
		ex = bt.acked == 1 || a.Seconds >= 2*bt.exemplar
		if ex {
			bt.exemplar = a.Seconds
		}
		bt.note(a)
		bt.mu.Unlock()
	}
	bt.settle()
	if ex && bt.sc.IsSampled() {
		return bt.sc
	}
	return trace.SpanContext{}
}

// note keeps what the span's end reports of a. Called with mu held.
func (bt *Batch) note(a Ack) {
	bt.slowest = max(bt.slowest, a.Seconds)
	if bt.parts == 0 || (bt.parts == 1 && a.Partition != bt.partSeen) {
		bt.parts++
		bt.partSeen = a.Partition
	}
	if bt.acked == 1 && a.Key != nil {
		if b, err := a.Key.Encode(); err == nil {
			bt.firstKey, bt.hasKey = string(b), true
		}
	}
	a.Key = nil
	bt.last = a
}

// unsampledSpread bounds the commit times of an unsampled batch's records:
// rows committed far apart do not share a trace id.
const unsampledSpread = time.Second

// settle ends one record's membership. When it was the last in flight, a
// full batch closes (a record that comes later starts a new one) and ends
// its span; any other waits the idle grace for more records, and closes
// then unless one joined meanwhile, which defers the close to its own
// settling.
func (bt *Batch) settle() {
	if !bt.recording || bt.open.Add(-1) != 0 {
		return
	}
	grace := time.Duration(idleGrace.Load())
	if grace <= 0 || bt.full.Load() {
		bt.close(false)
		return
	}
	bt.mu.Lock()
	bt.idleAt = time.Now()
	if bt.timer == nil {
		bt.timer = time.AfterFunc(grace, func() { bt.close(true) })
	} else {
		bt.timer.Reset(grace)
	}
	bt.mu.Unlock()
}

// close ends the span of a batch with no record in flight, once: at its
// last idle time when idle, else now.
func (bt *Batch) close(idle bool) {
	if bt.open.CompareAndSwap(0, closedMark) {
		bt.end(idle)
	}
}

// Abandon settles a record that will not be acked in this batch (set
// aside, or its session ended).
func (bt *Batch) Abandon() { bt.settle() }

func (bt *Batch) end(idle bool) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.timer != nil {
		bt.timer.Stop()
	}
	var opts []trace.SpanEndOption
	if idle { // ended after the grace: at the last settling
		opts = append(opts, trace.WithTimestamp(bt.idleAt))
	}
	if !bt.recording {
		bt.span.End()
		return
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, attribute.Int(attrBatchCount, bt.acked))
	if bt.slowest > 0 { // records without a commit time (backfill, republish) have none
		attrs = append(attrs, attribute.Float64(AttrCommitToAck, bt.slowest))
	}
	if bt.parts == 1 {
		attrs = append(attrs, attribute.String(attrPartition, strconv.Itoa(int(bt.partSeen))))
	}
	if bt.acked == 1 { // one record: its own attributes, as a per-event span would have
		attrs = append(attrs, attribute.String(attrMessageID, bt.last.ID.String()))
		if bt.last.Offset >= 0 {
			attrs = append(attrs, attribute.Int64(attrOffset, bt.last.Offset))
		}
		if bt.hasKey {
			attrs = append(attrs, attribute.String(attrKey, bt.firstKey))
		}
	}
	bt.span.SetAttributes(attrs...)
	bt.span.End(opts...)
}

// Rejected records that a record was set aside instead of sent (for
// reason): a short send span of its own, a child of its writer's span when
// writer is valid, with error status and an EventRejected event, and the
// record leaves its batch (bt, nil when it had none).
func Rejected(bt *Batch, writer trace.SpanContext, id uuid.UUID, topic, reason string, commit time.Time) {
	if bt != nil {
		bt.Abandon()
	}
	if !Enabled() {
		return
	}
	span := startSend(writer, id, topic, commit)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(Messaging(OpSend, topic, id.String())...)
	span.AddEvent(EventRejected, trace.WithAttributes(attribute.String(AttrReason, reason)))
	span.SetStatus(codes.Error, "set aside in outbox_rejected")
	span.End()
}

// ParseTraceparent reads a W3C traceparent (version 00 layout) without
// allocating; ok is false when v is not one.
func ParseTraceparent[T string | []byte](v T) (sc trace.SpanContext, ok bool) {
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' ||
		(len(v) > traceparentLen && v[traceparentLen] != '-') {
		return sc, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags, version [1]byte
	if !unhex(version[:], v[0:2]) || version[0] == 0xff ||
		!unhex(tid[:], v[3:35]) || !unhex(sid[:], v[36:52]) || !unhex(flags[:], v[53:55]) {
		return sc, false
	}
	if version[0] == 0 && len(v) != traceparentLen {
		return sc, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

func unhex[T string | []byte](dst []byte, src T) bool {
	for i := range dst {
		hi, ok1 := fromHex(src[2*i])
		lo, ok2 := fromHex(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// HeaderValue is the value of the first header named key in headers, nil
// when there is none.
func HeaderValue(headers []sarama.RecordHeader, key string) []byte {
	for i := range headers {
		if string(headers[i].Key) == key {
			return headers[i].Value
		}
	}
	return nil
}

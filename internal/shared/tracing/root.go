package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Root decisions. A record whose row carried no traceparent starts its own
// trace, and the relay and the worker must agree on whether it is sampled
// without the relay writing an unsampled traceparent into every record
// (most of tracing's cost at a low ratio). So such a trace's id is not
// random but RootTraceID of the event id: the relay's sampler decides on it
// (SampleRoot), writes a traceparent only into the records it samples, and
// the worker's sampler, given the same id for a record without one
// (WithRootTrace), decides the same when both have the same
// OTEL_TRACES_SAMPLER.

// rootRules is the root rule of the sampling Setup (or UseSampled)
// installed; nil when unknown, and then every root record is offered to
// the provider, which alone decides.
var rootRules atomic.Pointer[rootRule]

// RootTraceID is the trace id of event id's own trace, when its row carried
// no traceparent: both 64-bit halves of the id mixed with MurmurHash3's
// 64-bit finalizer (fmix64), so that trace-id-ratio samplers, which read
// the id's last 8 bytes, see uniformly spread bits even in a UUID's fixed
// version and variant bits. With hi and lo the big-endian halves of id:
// b = fmix64(hi ^ fmix64(lo)), a = fmix64(lo ^ b), the trace id is a then
// b, big-endian (a last byte of 1 when that is all zero).
func RootTraceID(id uuid.UUID) trace.TraceID {
	b := rootTraceLow(id)
	a := fmix64(binary.BigEndian.Uint64(id[8:]) ^ b)
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[:8], a)
	binary.BigEndian.PutUint64(tid[8:], b)
	if !tid.IsValid() {
		tid[15] = 1
	}
	return tid
}

// rootTraceLow is the last 8 bytes of RootTraceID(id), all that
// trace-id-ratio samplers read.
func rootTraceLow(id uuid.UUID) uint64 {
	return fmix64(binary.BigEndian.Uint64(id[:8]) ^ fmix64(binary.BigEndian.Uint64(id[8:])))
}

// fmix64 is MurmurHash3's 64-bit finalizer: every input bit changes each
// output bit with probability about one half.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// SampleRoot reports whether a root span of event id's own trace
// (RootTraceID) is sampled, as the installed sampler decides it; true when
// tracing is on with a provider whose sampler is unknown here (Use). It
// costs a few nanoseconds and no allocation: the relay asks it of every
// row without a traceparent.
func SampleRoot(id uuid.UUID) bool {
	r := rootRules.Load()
	return r == nil || r.all || rootTraceLow(id)>>1 < r.bound
}

// rootTraceKey is the context key of the trace id WithRootTrace sets.
type rootTraceKey struct{}

// WithRootTrace returns ctx in which a span started with no parent takes
// RootTraceID(id) as its trace id, when the provider is Setup's (or uses
// IDGenerator). A span with a parent keeps its parent's trace.
func WithRootTrace(ctx context.Context, id uuid.UUID) context.Context {
	return context.WithValue(ctx, rootTraceKey{}, RootTraceID(id))
}

// WithEventRoot is WithRootTrace for a consumed record's event_id header
// (eventID) when ctx carries no span context (the record had no
// traceparent): a span it starts without a parent is then in the trace the
// relay decided on, sampled the same with the same sampler. ctx is returned
// as is when it has a parent or eventID is not a UUID.
func WithEventRoot(ctx context.Context, eventID string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	id, err := uuid.Parse(eventID)
	if err != nil {
		return ctx
	}
	return WithRootTrace(ctx, id)
}

// IDGenerator is the generator of Setup's provider: random ids, but the
// trace id WithRootTrace put in the context for a root span. For tests and
// programs that build their own provider (UseSampled).
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tid, ok := ctx.Value(rootTraceKey{}).(trace.TraceID); ok && tid.IsValid() {
		return tid, newSpanID()
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

// newSpanID is a random span id, never the invalid zero one.
func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

package tracing

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C Trace Context.
const (
	Traceparent = "traceparent"
	Tracestate  = "tracestate"
)

// FromMap returns ctx with the remote span context found in headers (an
// outbox row's headers column): its traceparent and tracestate entries.
func FromMap(ctx context.Context, headers map[string]string) context.Context {
	if headers[Traceparent] == "" {
		return ctx
	}
	return Propagator().Extract(ctx, propagation.MapCarrier(headers))
}

// ToMap writes the span context of ctx into headers as traceparent (and
// tracestate when there is one), replacing what was there.
func ToMap(ctx context.Context, headers map[string]string) {
	delete(headers, Tracestate)
	Propagator().Inject(ctx, propagation.MapCarrier(headers))
}

// ConsumerHeaders is a propagation carrier over a consumed record's headers.
type ConsumerHeaders []*sarama.RecordHeader

// Get returns the value of the first header named key.
func (h ConsumerHeaders) Get(key string) string {
	for _, r := range h {
		if r != nil && string(r.Key) == key {
			return string(r.Value)
		}
	}
	return ""
}

// Set is not supported on a consumed record: it does nothing.
func (h ConsumerHeaders) Set(string, string) {}

// Keys lists the header names.
func (h ConsumerHeaders) Keys() []string {
	out := make([]string, 0, len(h))
	for _, r := range h {
		if r != nil {
			out = append(out, string(r.Key))
		}
	}
	return out
}

// FromRecord returns ctx with the remote span context of a consumed record.
func FromRecord(ctx context.Context, headers []*sarama.RecordHeader) context.Context {
	return Propagator().Extract(ctx, ConsumerHeaders(headers))
}

// SetRecordHeaders returns headers (a record to produce) with traceparent
// and tracestate set to the span context sc: existing entries are replaced
// in place, missing ones appended; a tracestate left empty is removed.
func SetRecordHeaders(headers []sarama.RecordHeader, sc trace.SpanContext) []sarama.RecordHeader {
	if !sc.IsValid() {
		return headers
	}
	headers = setHeader(headers, keyTraceparent, appendTraceparent(make([]byte, 0, traceparentLen), sc))
	if ts := sc.TraceState().String(); ts != "" {
		return setHeader(headers, keyTracestate, []byte(ts))
	}
	return dropHeader(headers, Tracestate)
}

// traceparentLen is the length of a version 00 traceparent.
const traceparentLen = 55

// FormatTraceparent is the W3C traceparent of sc (version 00).
func FormatTraceparent(sc trace.SpanContext) string {
	return string(appendTraceparent(make([]byte, 0, traceparentLen), sc))
}

func appendTraceparent(dst []byte, sc trace.SpanContext) []byte {
	const hex = "0123456789abcdef"
	var b [traceparentLen]byte
	copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, c := range tid {
		b[3+2*i], b[4+2*i] = hex[c>>4], hex[c&0xf]
	}
	b[35] = '-'
	for i, c := range sid {
		b[36+2*i], b[37+2*i] = hex[c>>4], hex[c&0xf]
	}
	b[52] = '-'
	f := byte(sc.TraceFlags())
	b[53], b[54] = hex[f>>4], hex[f&0xf]
	return append(dst, b[:]...)
}

// Header names as bytes, shared by every record (never written to).
var (
	keyTraceparent = []byte(Traceparent)
	keyTracestate  = []byte(Tracestate)
)

// setHeader sets the header named key (shared, never written) to value.
func setHeader(headers []sarama.RecordHeader, key, value []byte) []sarama.RecordHeader {
	for i := range headers {
		if string(headers[i].Key) == string(key) {
			headers[i].Value = value
			return headers
		}
	}
	return append(headers, sarama.RecordHeader{Key: key, Value: value})
}

func dropHeader(headers []sarama.RecordHeader, key string) []sarama.RecordHeader {
	for i := range headers {
		if string(headers[i].Key) == key {
			return append(headers[:i:i], headers[i+1:]...)
		}
	}
	return headers
}

// Observe records v on o, with the trace id of sc as an exemplar when sc is
// sampled (and o keeps exemplars): the bucket links to the trace.
func Observe(o prometheus.Observer, v float64, sc trace.SpanContext) {
	if sc.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(v)
}

// FromHeaders returns ctx with the remote span context found in headers of
// a record to produce (or a decoded one).
func FromHeaders(ctx context.Context, headers []sarama.RecordHeader) context.Context {
	var tp, ts string
	for _, h := range headers {
		switch string(h.Key) {
		case Traceparent:
			tp = string(h.Value)
		case Tracestate:
			ts = string(h.Value)
		}
	}
	if tp == "" {
		return ctx
	}
	return FromMap(ctx, map[string]string{Traceparent: tp, Tracestate: ts})
}

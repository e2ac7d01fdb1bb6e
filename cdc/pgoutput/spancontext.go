package pgoutput

import (
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// spanContextHeader is the internal header name under which the span
// context column's text travels from the tuple to spanContextHeaders. It
// cannot be an outbox header name (those are checked, and never start with
// a NUL byte), and it never leaves the decoder.
const spanContextHeader = "\x00" + outbox.DebeziumTracingSpanContext

// spanContextExtra adds the span context column (Mapping.TracingSpanContext)
// to the extra columns the decoder reads, and returns the header it arrives
// under and whether that header is the decoder's own (to drop) rather than
// one the mapping carries anyway.
func spanContextExtra(extras []outbox.Extra, column string) ([]outbox.Extra, string, bool) {
	if column == "" {
		return extras, "", false
	}
	for _, x := range extras {
		if x.Column == column {
			return extras, x.Header, false
		}
	}
	return append(extras, outbox.Extra{Column: column, Header: spanContextHeader}), spanContextHeader, true
}

// spanContextHeaders turns the span context column's properties text into
// traceparent and tracestate headers, as Debezium's router activates a span
// from it, unless the row's headers carry a traceparent already.
func (d *Decoder) spanContextHeaders(headers map[string]string) map[string]string {
	if d.spanContext == "" {
		return headers
	}
	text, ok := headers[d.spanContext]
	if d.dropSpanCtx {
		delete(headers, d.spanContext)
	}
	if !ok || headers[tracing.Traceparent] != "" {
		return headers
	}
	tp, ts := tracing.FromProperties(text)
	if tp == "" {
		return headers
	}
	headers[tracing.Traceparent] = tp
	if ts != "" {
		headers[tracing.Tracestate] = ts
	}
	return headers
}

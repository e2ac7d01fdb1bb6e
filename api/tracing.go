package api

import (
	"net/http"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// orderRoute is the route of the order server span.
const orderRoute = "/orders"

// traceOrder starts the server span of POST /orders when tracing is on: it
// continues the request's W3C traceparent, or starts a trace when there is
// none. It returns the writer and request to use and the function that ends
// the span with the response's status. Tracing off, it returns w and r
// unchanged.
func traceOrder(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	if !tracing.Enabled() {
		return w, r, func() {}
	}
	ctx := tracing.Propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := tracing.Tracer().Start(ctx, http.MethodPost+" "+orderRoute,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", http.MethodPost),
			attribute.String("http.route", orderRoute),
			attribute.String("url.path", r.URL.Path),
		))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	return rec, r.WithContext(ctx), func() {
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
		span.End()
	}
}

// orderHeaders returns the outbox headers of an order: the server span's own
// context when tracing is on (so the relay's span is its child), else the
// request's traceparent and tracestate as given (traceHeaders).
func orderHeaders(r *http.Request, eventID uuid.UUID, orderID string) map[string]string {
	span := trace.SpanFromContext(r.Context())
	if !tracing.Enabled() || !span.SpanContext().IsValid() {
		return traceHeaders(r.Header)
	}
	span.SetAttributes(
		attribute.String("messaging.message.id", eventID.String()),
		attribute.String("eventforge.aggregate_id", orderID),
	)
	out := map[string]string{}
	tracing.ToMap(r.Context(), out)
	return out
}

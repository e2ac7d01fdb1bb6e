package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/tracing"
)

const clientTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestOrderSpanContinuesTheRequestAndGoesToTheOutbox: with tracing on, the
// server span is a child of the request's traceparent and the outbox row
// gets the server span's own context; with it off, the request's as given.
func TestOrderSpanContinuesTheRequestAndGoesToTheOutbox(t *testing.T) {
	for _, tc := range []struct {
		name, traceparent string
		parent            bool // the span continues the request's trace
	}{
		{"continues a traceparent", clientTraceparent, true},
		{"starts a trace without one", "", false},
		{"starts a trace on a malformed one", "00-zz", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			defer tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
			r := httptest.NewRequest(http.MethodPost, "/orders", nil)
			if tc.traceparent != "" {
				r.Header.Set("traceparent", tc.traceparent)
			}
			w, r, end := traceOrder(httptest.NewRecorder(), r)
			headers := orderHeaders(r, uuid.New(), "o-1")
			w.WriteHeader(http.StatusCreated)
			end()
			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans, want 1", len(ended))
			}
			s := ended[0]
			if s.SpanKind() != trace.SpanKindServer || s.Name() != "POST /orders" {
				t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
			}
			if got := s.Parent().SpanID().String() == "00f067aa0ba902b7"; got != tc.parent {
				t.Errorf("parent %v, continues the request: %v, want %v", s.Parent(), got, tc.parent)
			}
			if headers[tracing.Traceparent] != tracing.FormatTraceparent(s.SpanContext()) {
				t.Errorf("outbox traceparent %q, want the server span's %q", headers[tracing.Traceparent], tracing.FormatTraceparent(s.SpanContext()))
			}
		})
	}
}

func TestOrderHeadersWithTracingOff(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/orders", nil)
	r.Header.Set("traceparent", clientTraceparent)
	w0 := httptest.NewRecorder()
	w, r, end := traceOrder(w0, r)
	defer end()
	if w != http.ResponseWriter(w0) {
		t.Error("tracing off wraps the writer")
	}
	if got := orderHeaders(r, uuid.New(), "o-1")[tracing.Traceparent]; got != clientTraceparent {
		t.Errorf("outbox traceparent %q, want the request's", got)
	}
}

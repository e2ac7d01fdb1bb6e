package main

import (
	"context"
	"log/slog"

	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// startTracing turns OpenTelemetry tracing on for a command from the
// standard OTEL_* variables (docs/tracing.md), with service as the default
// service.name. It returns the function that flushes the spans still queued;
// with no endpoint set, tracing stays off and the function does nothing.
func startTracing(ctx context.Context, service string, log *slog.Logger) (func(), error) {
	c := tracing.FromEnv(service, nil)
	shutdown, err := tracing.Setup(ctx, c)
	if err != nil {
		return nil, err
	}
	if c.On() {
		log.Info("tracing on: spans go to the OTLP endpoint", "endpoint", c.Endpoint, "protocol", c.Protocol, "service", service)
		if c.SamplingErr != nil {
			log.Warn("tracing: sampler setting ignored", "error", c.SamplingErr)
		}
	}
	return func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			log.Warn("tracing: spans not flushed at exit", "error", err)
		}
		if c.On() {
			st := tracing.SpanStats()
			log.Info("tracing: spans at exit", "ended", st.Ended, "exported", st.Exported,
				"failed", st.Failed, "dropped", st.Dropped())
		}
	}, nil
}

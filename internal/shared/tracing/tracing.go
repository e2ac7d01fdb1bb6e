// Package tracing sets up OpenTelemetry tracing for the EventForge commands
// from the standard OTEL_* environment variables, and carries a W3C trace
// context through the places an event passes: an outbox row's headers, a
// Kafka record's headers and a Prometheus exemplar.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set: then Setup installs nothing, every
// Tracer is OpenTelemetry's no-op one and Enabled reports false, so the hot
// paths skip all tracing work with one branch.
//
// Imports (floor: shared library): no other EventForge package.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Standard OpenTelemetry environment variables read here (the exporters and
// the SDK read the others: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, the
// sampler and the resource attributes).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Protocols of the OTLP exporter.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// ScopeName is the instrumentation scope of EventForge's spans.
const ScopeName = "github.com/eventforge/eventforge"

// shutdownTimeout bounds the flush of the spans still queued at exit.
const shutdownTimeout = 5 * time.Second

// enabled is set once Setup installed a real provider; tracer is its
// tracer, cached so hot paths skip the provider's lookup.
var (
	enabled atomic.Bool
	tracer  atomic.Pointer[trace.Tracer]
	noopTr  trace.Tracer = noop.NewTracerProvider().Tracer(ScopeName)
)

// Enabled reports whether tracing is on in this process: false until Setup
// found an endpoint. Hot paths test it before any tracing work.
func Enabled() bool { return enabled.Load() }

// Tracer is EventForge's tracer from the global provider: the no-op one
// while tracing is off.
func Tracer() trace.Tracer {
	if t := tracer.Load(); t != nil && Enabled() {
		return *t
	}
	return noopTr
}

// Config is what Setup reads from the environment.
type Config struct {
	Endpoint    string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT; empty: off
	Protocol    string // ProtocolHTTP (default) or ProtocolGRPC
	ServiceName string // the default service.name; OTEL_SERVICE_NAME overrides it
	Disabled    bool   // OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none

	// Sampling is OTEL_TRACES_SAMPLER(_ARG)'s (SamplingFromEnv); zero:
	// parent-based always-on. SamplingErr is what was wrong with them: not
	// fatal, as the specification asks, but worth a warning.
	Sampling    Sampling
	SamplingErr error
}

// FromEnv reads the configuration of a command whose default service name is
// service from getenv (os.Getenv when nil).
func FromEnv(service string, getenv func(string) string) Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{ServiceName: service, Protocol: ProtocolHTTP}
	c.Endpoint = strings.TrimSpace(getenv(EnvTracesEndpoint))
	if c.Endpoint == "" {
		c.Endpoint = strings.TrimSpace(getenv(EnvEndpoint))
	}
	if p := strings.TrimSpace(getenv(EnvTracesProtocol)); p != "" {
		c.Protocol = p
	} else if p := strings.TrimSpace(getenv(EnvProtocol)); p != "" {
		c.Protocol = p
	}
	c.Sampling, c.SamplingErr = SamplingFromEnv(getenv)
	c.Disabled = strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv(EnvTracesExporter)), "none")
	return c
}

// On reports whether c turns tracing on.
func (c Config) On() bool { return c.Endpoint != "" && !c.Disabled }

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.On() && c.Protocol != ProtocolHTTP && c.Protocol != ProtocolGRPC {
		errs = append(errs, fmt.Errorf("%s: %q is not supported (use %s or %s)", EnvProtocol, c.Protocol, ProtocolHTTP, ProtocolGRPC))
	}
	if c.ServiceName == "" {
		errs = append(errs, errors.New("tracing: a default service name is required"))
	}
	return errors.Join(errs...)
}

// Shutdown flushes the spans still queued and stops the exporter.
type Shutdown func(context.Context) error

// Setup installs the global tracer provider and the W3C propagator when c
// turns tracing on, and returns the function that flushes it at exit. When
// tracing is off it installs nothing and returns a no-op Shutdown.
func Setup(ctx context.Context, c Config) (Shutdown, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.On() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := newExporter(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("tracing: start the OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", c.ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newProcessor(exp)), sdktrace.WithResource(res),
		sdktrace.WithSampler(c.Sampling.Sampler()), sdktrace.WithIDGenerator(IDGenerator()))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	UseSampled(tp, c.Sampling)
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
		defer cancel()
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

func newExporter(ctx context.Context, c Config) (sdktrace.SpanExporter, error) {
	// The exporters read the endpoint (a URL; http:// means no TLS),
	// headers, timeout and TLS files from the environment themselves.
	if c.Protocol == ProtocolGRPC {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

// Propagator is the W3C Trace Context propagator (traceparent, tracestate).
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Use makes tp EventForge's tracer provider and turns tracing on, without
// touching the OpenTelemetry globals: for tests (with an in-memory
// recorder) and for programs that embed EventForge's packages with a
// provider of their own. Its sampler being unknown here, every record
// without a traceparent is offered to tp's sampler (SampleRoot is true).
// The function returned turns tracing off again.
func Use(tp trace.TracerProvider) (off func()) { return use(tp, nil) }

// UseSampled is Use for a provider built with s.Sampler() and IDGenerator,
// as Setup's is: the relay's root decisions (SampleRoot) are then s's, and
// a record it does not sample carries no traceparent.
func UseSampled(tp trace.TracerProvider, s Sampling) (off func()) {
	r := s.rootRule()
	return use(tp, &r)
}

func use(tp trace.TracerProvider, roots *rootRule) (off func()) {
	rootRules.Store(roots)
	t := tp.Tracer(ScopeName)
	tracer.Store(&t)
	enabled.Store(true)
	return func() {
		enabled.Store(false)
		tracer.Store(nil)
		rootRules.Store(nil)
	}
}

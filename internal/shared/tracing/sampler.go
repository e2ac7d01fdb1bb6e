package tracing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Sampler variables and the values OTEL_TRACES_SAMPLER takes.
const (
	EnvSampler    = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg = "OTEL_TRACES_SAMPLER_ARG"

	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// Sampling is a sampler as OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// name it. EventForge builds its provider's sampler from it (instead of
// leaving the variables to the SDK) because it makes the same root
// decisions without the SDK's per-call cost (SampleRoot).
type Sampling struct {
	Name  string  // one of the Sampler* names; empty: parentbased_always_on
	Ratio float64 // the share of traces a trace-id-ratio sampler keeps, 0 to 1 (default 1)
}

// SamplingFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG with
// getenv as the OpenTelemetry SDK does. A value it cannot use is reported
// in err and, as the specification asks, replaced: an unknown sampler by
// the default, a ratio that is not a number from 0 to 1 by 1.
func SamplingFromEnv(getenv func(string) string) (Sampling, error) {
	s := Sampling{Name: strings.ToLower(strings.TrimSpace(getenv(EnvSampler))), Ratio: 1}
	switch s.Name {
	case "":
		s.Name = SamplerParentBasedAlwaysOn
	case SamplerAlwaysOn, SamplerAlwaysOff, SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff:
	case SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio:
		arg := strings.TrimSpace(getenv(EnvSamplerArg))
		if arg == "" {
			break
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return s, errors.New(EnvSamplerArg + ": " + strconv.Quote(arg) + " is not a ratio from 0 to 1, 1 used instead")
		}
		s.Ratio = v
	default:
		name := s.Name
		s.Name = SamplerParentBasedAlwaysOn
		return s, fmt.Errorf("%s: %q is not supported, %s used instead", EnvSampler, name, s.Name)
	}
	return s, nil
}

// Sampler is the OpenTelemetry sampler s names.
func (s Sampling) Sampler() sdktrace.Sampler {
	switch s.Name {
	case SamplerAlwaysOn:
		return sdktrace.AlwaysSample()
	case SamplerAlwaysOff:
		return sdktrace.NeverSample()
	case SamplerParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case SamplerTraceIDRatio:
		return sdktrace.TraceIDRatioBased(s.Ratio)
	case SamplerParentBasedTraceIDRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.Ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// rootRule is how a Sampling decides a span without a parent, from its
// trace id alone.
type rootRule struct {
	all   bool   // every root is sampled
	bound uint64 // else: those whose trace id's last 8 bytes, shifted right once, are below it
}

// rootRule is s's rule for roots: the SDK's trace-id-ratio rule (a bound
// of ratio × 2^63), which TestRelayAndWorkerDecideRootsAlike holds against
// the SDK's own decisions.
func (s Sampling) rootRule() rootRule {
	switch s.Name {
	case SamplerAlwaysOff, SamplerParentBasedAlwaysOff:
		return rootRule{}
	case SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio:
		if s.Ratio >= 1 {
			return rootRule{all: true}
		}
		return rootRule{bound: uint64(max(s.Ratio, 0) * (1 << 63))}
	}
	return rootRule{all: true}
}

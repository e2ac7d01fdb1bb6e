package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestSinkCountsExportedSpans sends spans with the SDK's OTLP/HTTP exporter,
// plain and gzipped, and reads the counts back.
func TestSinkCountsExportedSpans(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gzip  bool
		spans int
	}{
		{"plain", false, 7},
		{"gzip", true, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sink{}
			srv := httptest.NewServer(s.handler())
			defer srv.Close()
			opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(srv.URL + "/v1/traces")}
			if tc.gzip {
				opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
			}
			exp, err := otlptracehttp.New(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
			for range tc.spans {
				_, sp := tp.Tracer("t").Start(context.Background(), "s")
				sp.End()
			}
			if err := tp.Shutdown(context.Background()); err != nil {
				t.Fatal(err) // the exporter saw an error answer
			}
			resp, err := http.Get(srv.URL + "/count")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			fields := strings.Fields(string(b))
			if len(fields) != 2 || fields[0] != strconv.Itoa(tc.spans) || fields[1] == "0" {
				t.Fatalf("counts %q, want %d spans in at least one request", b, tc.spans)
			}
			if s.bad.Load() != 0 {
				t.Fatalf("%d requests refused", s.bad.Load())
			}
		})
	}
}

func TestSinkRefusesGarbage(t *testing.T) {
	s := &sink{}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/traces", "application/x-protobuf", strings.NewReader("\xff\xff\xff"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || s.bad.Load() != 1 || s.spans.Load() != 0 {
		t.Fatalf("status %d, bad %d, spans %d", resp.StatusCode, s.bad.Load(), s.spans.Load())
	}
}

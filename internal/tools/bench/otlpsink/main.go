// Command otlpsink is an OTLP/HTTP trace endpoint that counts the spans it
// receives and keeps nothing: the backend of the bench's tracing-cost runs
// (docs/bench.md#tracing), so what the relay pays for tracing is measured
// without a real backend's CPU on the same machine.
//
//	go run ./internal/tools/bench/otlpsink -addr 127.0.0.1:4318
//
// It answers POST /v1/traces (protobuf, gzip or not) with an empty success,
// and GET /count with "<spans> <requests>"; on SIGINT or SIGTERM it prints
// the same counts and exits.
//
// Imports (floor: tool): the standard library and the OpenTelemetry
// protocol's types only; nothing of the product.
package main

import (
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "listen address")
	flag.Parse()
	s := &sink{}
	srv := &http.Server{Addr: *addr, Handler: s.handler()}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	fmt.Println(s.counts())
}

// sink counts what it received.
type sink struct {
	spans, requests, bad atomic.Int64
}

func (s *sink) counts() string {
	return fmt.Sprintf("%d %d", s.spans.Load(), s.requests.Load())
}

func (s *sink) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.traces)
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, s.counts())
	})
	return mux
}

// traces decodes an export request, counts its spans and answers success.
func (s *sink) traces(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			s.refuse(w, err)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		s.refuse(w, err)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		s.refuse(w, err)
		return
	}
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	s.spans.Add(int64(n))
	s.requests.Add(1)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *sink) refuse(w http.ResponseWriter, err error) {
	s.bad.Add(1)
	http.Error(w, err.Error(), http.StatusBadRequest)
}

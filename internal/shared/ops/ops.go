// Package ops serves what operators read from every long-running command:
// /healthz (the process is alive), /readyz (it does its job, with a JSON body
// that says why not) and /metrics (Prometheus, from an explicit registry).
//
// Imports (floor: shared library): no other EventForge package.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyFunc reports nil when its component is ready, or why it is not. It must
// return quickly and must not leak secrets into the error text.
//
// An alias, so a consumer can declare the method it needs as
// Add(string, func(context.Context) error) without importing this package.
type ReadyFunc = func(ctx context.Context) error

// Readiness collects named ReadyFuncs; it is ready when all of them are.
type Readiness struct {
	mu     sync.RWMutex
	checks map[string]ReadyFunc
}

// Add registers a check under name, replacing any earlier one.
func (r *Readiness) Add(name string, f ReadyFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checks == nil {
		r.checks = make(map[string]ReadyFunc)
	}
	r.checks[name] = f
}

// Check runs every check and returns the failures by name.
func (r *Readiness) Check(ctx context.Context) map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	failed := map[string]string{}
	for name, f := range r.checks {
		if err := f(ctx); err != nil {
			failed[name] = err.Error()
		}
	}
	return failed
}

// NewRegistry returns a registry with the Go and process collectors, the
// baseline every EventForge command exports.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Option changes what Handler serves.
type Option func(*http.ServeMux)

// WithPprof also serves net/http/pprof under /debug/pprof/. It exposes heap
// contents and costs CPU while profiling, so commands keep it off unless
// asked (--pprof).
func WithPprof() Option {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
}

// Handler serves /healthz, /readyz and /metrics, and what opts add. Callers
// may mount more routes on the returned mux.
func Handler(reg prometheus.Gatherer, ready *Readiness, opts ...Option) *http.ServeMux {
	mux := http.NewServeMux()
	for _, o := range opts {
		o(mux)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if failed := ready.Check(ctx); len(failed) > 0 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reasons": failed})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	return mux
}

// Serve listens on addr and serves h until ctx ends, then shuts down within
// a few seconds. An empty addr serves nothing and waits for ctx.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("serving health and metrics", "addr", ln.Addr().String())
	return ServeListener(ctx, ln, h)
}

// ServeListener is Serve on an open listener.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

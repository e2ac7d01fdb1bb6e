// Package api serves the orders HTTP API: POST /orders writes an order and its
// order.created outbox event in one transaction, GET /orders/{id} reads it
// back. /healthz, /readyz and /metrics are served next to it (package ops),
// with GET /openapi.json, the OpenAPI 3.0 document of all of them. An
// optional bearer token guards the /orders routes.
//
// Imports (floor: product): shared libraries only; never cdc, worker or the
// tools.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/eventforge/eventforge/internal/shared/ops"
	"github.com/eventforge/eventforge/internal/shared/pgconn"
)

// Server is the orders API on one database pool.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   store
	metrics *metrics
	ops     http.Handler   // /healthz, /readyz, /metrics
	mux     *http.ServeMux // every route, before instrumentation
	handler http.Handler   // mux, instrumented, with panics recovered and a deadline
}

// New validates cfg and builds a Server on pool. Its metrics are registered on reg, which also
// serves /metrics (ops.NewRegistry gives one with the Go and process
// collectors).
func New(cfg Config, pool *pgxpool.Pool, log *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	return newServer(newPGStore(pool), cfg, log, reg)
}

func newServer(st store, cfg Config, log *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register API metrics: %w", err)
	}
	if ps, ok := st.(*pgStore); ok {
		ps.ttl = cfg.IdempotencyTTL
	}
	s := &Server{cfg: cfg, log: log, store: st, metrics: m}
	var ready ops.Readiness
	ready.Add("postgres", st.ready)
	s.ops = ops.Handler(reg, &ready)

	s.mux = ops.Handler(reg, &ready) // GET /healthz, /readyz, /metrics
	registerRoutes(s.mux, s.routes())
	// instrument must hand its own request to the mux, which records the
	// matched pattern on it: nothing may copy the request in between.
	s.handler = s.withTimeout(m.instrument(s.recoverPanics(s.mux)))
	return s, nil
}

// route is one "METHOD /path" pattern of the API. handler is nil for the
// routes ops.Handler registers itself.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes lists every route served on --http-addr; openapi.json documents
// exactly these (a test checks it). The /orders routes need the bearer token
// when one is configured; health, metrics and the document stay open.
func (s *Server) routes() []route {
	return []route{
		{"GET /healthz", nil},
		{"GET /readyz", nil},
		{"GET /metrics", nil},
		{"GET /openapi.json", serveOpenAPI},
		{"POST /orders", s.requireToken(s.postOrder)},
		{"GET /orders/{id}", s.requireToken(s.getOrder)},
	}
}

// registerRoutes adds rs to mux, a 405 with Allow for the other methods of
// each path and a JSON 404 for everything else.
func registerRoutes(mux *http.ServeMux, rs []route) {
	var paths []string
	allowed := map[string][]string{}
	for _, r := range rs {
		method, path, _ := strings.Cut(r.pattern, " ")
		if r.handler != nil {
			mux.HandleFunc(r.pattern, r.handler)
		}
		if _, ok := allowed[path]; !ok {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
		if method == http.MethodGet {
			allowed[path] = append(allowed[path], http.MethodHead) // GET patterns serve HEAD too
		}
	}
	for _, p := range paths {
		mux.HandleFunc(p, methodNotAllowed(strings.Join(allowed[p], ", ")))
	}
	mux.HandleFunc("/", notFound)
}

// redact hides the bearer token in text that may quote it (a panic value).
func (s *Server) redact(text string) string {
	if s.cfg.Token == "" {
		return text
	}
	return strings.ReplaceAll(text, string(s.cfg.Token), s.cfg.Token.String())
}

// Handler is the whole API: orders routes, /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// withTimeout gives every request a deadline of RequestTimeout.
func (s *Server) withTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// recoverPanics turns a handler panic into a 500 JSON answer with no details
// and logs the panic with its stack (never the request's headers, which may
// hold the token). A panic after the answer has started aborts the
// connection instead.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v) // net/http's own way to abort quietly
			}
			s.metrics.panics.Inc()
			s.log.Error("handler panicked", "method", r.Method, "route", r.Pattern,
				"panic", s.redact(fmt.Sprint(v)), "stack", string(debug.Stack()))
			if rec.wroteHeader {
				panic(http.ErrAbortHandler)
			}
			writeError(w, http.StatusInternalServerError, "internal error")
		}()
		next.ServeHTTP(rec, r)
	})
}

// Run listens on HTTPAddr (and MetricsAddr when set) and serves until ctx
// ends, then lets in-flight requests finish within ShutdownTimeout. It
// returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	var metricsLn net.Listener
	if s.cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen on %s: %w", s.cfg.MetricsAddr, err)
		}
	}
	s.checkReady(ctx)
	pruneCtx, stopPruning := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() { defer close(pruned); s.pruneLoop(pruneCtx) }()
	defer func() { stopPruning(); <-pruned }()
	return s.serve(ctx, ln, metricsLn)
}

// checkReady logs once at start whether the database is usable; not being
// ready is not fatal (the database may come up later).
func (s *Server) checkReady(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.store.ready(ctx); err != nil {
		s.log.Warn("not ready yet; /readyz reports it until it is", "reason", err.Error())
	}
}

// serve serves the API on ln and the ops routes on metricsLn (when not nil)
// until ctx ends.
func (s *Server) serve(ctx context.Context, ln, metricsLn net.Listener) error {
	g, ctx := errgroup.WithContext(ctx)
	s.log.Info("serving orders API", "addr", ln.Addr().String())
	g.Go(func() error { return s.serveHTTP(ctx, ln) })
	if metricsLn != nil {
		s.log.Info("serving health and metrics", "addr", metricsLn.Addr().String())
		g.Go(func() error { return ops.ServeListener(ctx, metricsLn, s.ops) })
	}
	return g.Wait()
}

func (s *Server) serveHTTP(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }() // ends when Shutdown closes ln
	select {
	case err := <-errc:
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down orders API", "grace", s.cfg.ShutdownTimeout.String())
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	if err != nil {
		return fmt.Errorf("shut down HTTP: %w", err)
	}
	s.log.Info("orders API stopped")
	return nil
}

// Run opens a pool on cfg.PGURL and serves the API until ctx ends. A database
// that does not answer yet is not fatal: /readyz reports it until it does.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.PGURL)
	if err != nil {
		return fmt.Errorf("invalid PostgreSQL URL %s", pgconn.Redact(cfg.PGURL))
	}
	if cfg.CreateTables {
		ensureDemoSchema(ctx, cfg.PGURL, log)
	}
	poolCfg.MaxConns = cfg.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("open pool for %s: %w", pgconn.Redact(cfg.PGURL), err)
	}
	defer pool.Close()

	srv, err := New(cfg, pool, log, ops.NewRegistry())
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

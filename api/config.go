package api

import (
	"errors"
	"net"
	"time"

	"github.com/eventforge/eventforge/internal/shared/fielderr"
)

// Config configures the orders API. Start from DefaultConfig, change what
// you need, then New (or Run) validates it; the defaults are DefaultConfig's.
type Config struct {
	// PGURL is the PostgreSQL URL Run connects to (New takes a pool
	// instead). Required by Run; no default.
	PGURL string
	// MaxConns bounds the connection pool Run opens. Default 10.
	MaxConns int32
	// HTTPAddr is where the API, /healthz, /readyz and /metrics are served.
	// Default 127.0.0.1:8080.
	HTTPAddr string
	// MetricsAddr, when set, serves /healthz, /readyz and /metrics there
	// too. Default empty: not.
	MetricsAddr string

	// RequestTimeout bounds each request's work (its context deadline).
	// Default 10 s.
	RequestTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server's; WriteTimeout must leave room for RequestTimeout.
	// Defaults 5 s, 15 s, 20 s and 60 s.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// the context ends. Default 15 s.
	ShutdownTimeout time.Duration
	// MaxBodyBytes is the largest request body accepted (413 above).
	// Default 1 MiB.
	MaxBodyBytes int64
	// MaxHeaderBytes bounds the request line and headers (the http.Server
	// answers 431 above it). Default 32 KiB.
	MaxHeaderBytes int

	// Token, when set, is the bearer token every /orders request must
	// carry. It prints as [redacted]. Default empty: no token.
	Token Token

	// IdempotencyTTL is how long an Idempotency-Key's answer is kept: a
	// retry within it gets the stored answer, a key older than it is a new
	// request, and Run prunes expired keys in small batches. Default 24h.
	IdempotencyTTL time.Duration

	// CreateTables makes Run create the tables the API writes (orders,
	// api_idempotency) when they are missing. Default true.
	CreateTables bool
}

// DefaultConfig returns the defaults: loopback :8080, 10 s per request, 1 MiB
// bodies, 32 KiB of headers, no token.
func DefaultConfig() Config {
	return Config{
		MaxConns:          10,
		HTTPAddr:          "127.0.0.1:8080",
		RequestTimeout:    10 * time.Second,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      20 * time.Second,
		IdleTimeout:       60 * time.Second,
		ShutdownTimeout:   15 * time.Second,
		MaxBodyBytes:      1 << 20,
		MaxHeaderBytes:    32 << 10,
		CreateTables:      true,
		IdempotencyTTL:    24 * time.Hour,
	}
}

// Validate reports every invalid setting at once (errors.Join), each
// naming its field ("Config.HTTPAddr: ..."). It does not check PGURL, which
// only Run needs.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) { errs = append(errs, fielderr.New(field, format, args...)) }
	if c.HTTPAddr == "" {
		add("Config.HTTPAddr", "required")
	} else if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		add("Config.HTTPAddr", "invalid address %q: want host:port", c.HTTPAddr)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			add("Config.MetricsAddr", "invalid address %q: want host:port", c.MetricsAddr)
		}
	}
	if c.MaxConns < 1 {
		add("Config.MaxConns", "%d: want at least 1", c.MaxConns)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"Config.RequestTimeout", c.RequestTimeout},
		{"Config.ReadHeaderTimeout", c.ReadHeaderTimeout},
		{"Config.ReadTimeout", c.ReadTimeout},
		{"Config.WriteTimeout", c.WriteTimeout},
		{"Config.IdleTimeout", c.IdleTimeout},
		{"Config.ShutdownTimeout", c.ShutdownTimeout},
		{"Config.IdempotencyTTL", c.IdempotencyTTL},
	} {
		if d.v <= 0 {
			add(d.field, "%s: want > 0", d.v)
		}
	}
	if c.WriteTimeout <= c.RequestTimeout {
		add("Config.WriteTimeout", "%s must exceed Config.RequestTimeout %s, or timed-out requests get no answer", c.WriteTimeout, c.RequestTimeout)
	}
	if c.MaxBodyBytes < 1 {
		add("Config.MaxBodyBytes", "%d: want > 0", c.MaxBodyBytes)
	}
	if c.MaxHeaderBytes < 1024 {
		add("Config.MaxHeaderBytes", "%d: want at least 1024", c.MaxHeaderBytes)
	}
	if c.Token != "" {
		errs = append(errs, fielderr.Wrap("Config.Token", c.Token.Validate("API token")))
	}
	return errors.Join(errs...)
}

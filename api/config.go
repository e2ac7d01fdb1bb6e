package api

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Config configures the orders API. Start from DefaultConfig.
type Config struct {
	// PGURL is the PostgreSQL URL Run connects to (New takes a pool instead).
	PGURL string
	// MaxConns bounds the connection pool Run opens.
	MaxConns int32
	// HTTPAddr is where the API, /healthz, /readyz and /metrics are served.
	HTTPAddr string
	// MetricsAddr, when set, serves /healthz, /readyz and /metrics there too.
	MetricsAddr string

	// RequestTimeout bounds each request's work (its context deadline).
	RequestTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// http.Server's; WriteTimeout must leave room for RequestTimeout.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// the context ends.
	ShutdownTimeout time.Duration
	// MaxBodyBytes is the largest request body accepted (413 above).
	MaxBodyBytes int64
	// MaxHeaderBytes bounds the request line and headers (the http.Server
	// answers 431 above it).
	MaxHeaderBytes int

	// Token, when set, is the bearer token every /orders request must
	// carry. It prints as [redacted].
	Token Token

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
	}
}

// Validate reports the first invalid setting. It does not check PGURL, which
// only Run needs.
func (c Config) Validate() error {
	if c.HTTPAddr == "" {
		return errors.New("no HTTP address: set --http-addr")
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return fmt.Errorf("invalid --http-addr %q: want host:port", c.HTTPAddr)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return fmt.Errorf("invalid --metrics-addr %q: want host:port", c.MetricsAddr)
		}
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("invalid max connections %d: want at least 1", c.MaxConns)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"request timeout", c.RequestTimeout},
		{"read header timeout", c.ReadHeaderTimeout},
		{"read timeout", c.ReadTimeout},
		{"write timeout", c.WriteTimeout},
		{"idle timeout", c.IdleTimeout},
		{"shutdown timeout", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("invalid %s %s: want > 0", d.name, d.v)
		}
	}
	if c.WriteTimeout <= c.RequestTimeout {
		return fmt.Errorf("write timeout %s must exceed request timeout %s, or timed-out requests get no answer", c.WriteTimeout, c.RequestTimeout)
	}
	if c.MaxBodyBytes < 1 {
		return fmt.Errorf("invalid max body size %d: want > 0", c.MaxBodyBytes)
	}
	if c.MaxHeaderBytes < 1024 {
		return fmt.Errorf("invalid max header size %d: want at least 1024", c.MaxHeaderBytes)
	}
	if c.Token != "" {
		if err := c.Token.validate(); err != nil {
			return err
		}
	}
	return nil
}

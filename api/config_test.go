package api

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"defaults", func(*Config) {}, ""},
		{"metrics addr", func(c *Config) { c.MetricsAddr = "127.0.0.1:9090" }, ""},
		{"no http addr", func(c *Config) { c.HTTPAddr = "" }, "Config.HTTPAddr: required"},
		{"bad http addr", func(c *Config) { c.HTTPAddr = "localhost" }, "Config.HTTPAddr: invalid address"},
		{"bad metrics addr", func(c *Config) { c.MetricsAddr = "9090" }, "Config.MetricsAddr: invalid address"},
		{"zero conns", func(c *Config) { c.MaxConns = 0 }, "Config.MaxConns: 0"},
		{"zero request timeout", func(c *Config) { c.RequestTimeout = 0 }, "Config.RequestTimeout: 0s"},
		{"negative shutdown", func(c *Config) { c.ShutdownTimeout = -time.Second }, "Config.ShutdownTimeout: -1s"},
		{"write below request", func(c *Config) { c.WriteTimeout = c.RequestTimeout }, "Config.WriteTimeout: 10s must exceed Config.RequestTimeout"},
		{"zero body", func(c *Config) { c.MaxBodyBytes = 0 }, "Config.MaxBodyBytes: 0"},
		{"tiny header limit", func(c *Config) { c.MaxHeaderBytes = 100 }, "Config.MaxHeaderBytes: 100"},
		{"token", func(c *Config) { c.Token = "0123456789abcdef" }, ""},
		{"short token", func(c *Config) { c.Token = "0123456789abcde" }, "16 to 4096"},
		{"token with space", func(c *Config) { c.Token = "0123456789 abcdef" }, "visible ASCII"},
		{"token with newline", func(c *Config) { c.Token = "0123456789abcdef\n" }, "visible ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if c.HTTPAddr != "127.0.0.1:8080" || c.MaxBodyBytes != 1<<20 || c.MaxHeaderBytes != 32<<10 || c.Token != "" {
		t.Fatalf("defaults changed: %+v", c)
	}
}

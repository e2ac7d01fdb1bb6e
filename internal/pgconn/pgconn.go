// Package pgconn holds PostgreSQL connection helpers shared by every command:
// parsing URLs without leaking their passwords, and replication connections.
package pgconn

import (
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// ParseConfig parses a connection URL or DSN; its error never repeats the
// input, which may hold a password.
func ParseConfig(connString string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("invalid PostgreSQL URL %s", Redact(connString))
	}
	return cfg, nil
}

// Redact returns a URL with its password replaced by "xxxxx". Input that is
// not a URL is hidden whole, since a DSN may carry password=….
func Redact(connString string) string {
	u, err := url.Parse(connString)
	if err != nil || u.Scheme == "" {
		return "(connection string hidden)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

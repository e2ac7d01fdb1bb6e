// Package pgconn holds PostgreSQL connection helpers shared by every command:
// parsing URLs without leaking their passwords, and replication connections.
//
// Imports (floor: shared library): no other EventForge package.
package pgconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
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

// Redact returns a URL with its password (and sslpassword) replaced by
// "xxxxx". Input that is not a URL is hidden whole, since a DSN may carry
// password=….
func Redact(connString string) string {
	u, err := url.Parse(connString)
	if err != nil || u.Scheme == "" {
		return "(connection string hidden)"
	}
	q := u.Query()
	changed := false
	for _, k := range []string{"password", "sslpassword"} { // sslpassword unlocks the client key
		if q.Has(k) {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// CertificateError reports whether err comes from verifying the server's
// TLS certificate (unknown authority, wrong host, expired): a configuration
// problem that retrying cannot fix.
func CertificateError(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

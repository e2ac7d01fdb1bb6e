package schemareg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Schema is one schema of the registry, compiled.
type Schema struct {
	ID      int
	Subject string // empty when known by id only
	Version int    // 0 when known by id only
	Type    string // avro, protobuf or json-schema
	codec   codec
}

// where names s in a mismatch.
func (s *Schema) where() string {
	if s.Subject == "" {
		return fmt.Sprintf("schema id %d", s.ID)
	}
	return fmt.Sprintf("subject %s version %d (schema id %d)", s.Subject, s.Version, s.ID)
}

// Registry reads schemas from a registry and keeps them: by id and by
// subject version for good (a registered schema never changes), a
// subject's latest version for LatestTTL. Safe for concurrent use.
type Registry struct {
	cl      *sr.Client
	timeout time.Duration
	ttl     time.Duration
	m       *metrics

	mu        sync.RWMutex
	byID      map[int]*Schema
	byVersion map[subjectVersion]*Schema
	latest    map[string]latestEntry
}

type subjectVersion struct {
	subject string
	version int
}

type latestEntry struct {
	s       *Schema
	fetched time.Time
}

// NewRegistry connects nothing yet: it checks c's files and returns the
// client. reg takes its metrics (nil: none).
func NewRegistry(c Config, reg prometheus.Registerer) (*Registry, error) {
	c = c.WithDefaults()
	opts := []sr.ClientOpt{sr.URLs(strings.Split(c.URL, ",")...), sr.UserAgent("eventforge")}
	auth, err := authOpts(c)
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth...)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return &Registry{cl: cl, timeout: c.Timeout, ttl: c.LatestTTL, m: m,
		byID: map[int]*Schema{}, byVersion: map[subjectVersion]*Schema{}, latest: map[string]latestEntry{}}, nil
}

// authOpts are the client options of c's authentication and TLS.
func authOpts(c Config) ([]sr.ClientOpt, error) {
	var opts []sr.ClientOpt
	switch {
	case c.Username != "":
		pass := ""
		if c.PasswordFile != "" {
			p, err := readSecret(c.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("--schema-registry-password-file: %w", err)
			}
			pass = p
		}
		opts = append(opts, sr.BasicAuth(c.Username, pass))
	case c.TokenFile != "":
		tok, err := readSecret(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--schema-registry-token-file: %w", err)
		}
		opts = append(opts, sr.BearerToken(tok))
	}
	if c.CAFile == "" && c.CertFile == "" {
		return opts, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--schema-registry-ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--schema-registry-ca-file %s: no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--schema-registry-cert-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return append(opts, sr.HTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}})), nil
}

// classify says whether a registry error is an answer (the subject,
// version or id does not exist: the event's fault) or an outage: no
// answer, a timeout, a server error, refused credentials or throttling.
func classify(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusNotFound, http.StatusUnprocessableEntity:
			return err
		}
	}
	return fmt.Errorf("schema registry %w: %w", outbox.ErrUnavailable, err)
}

// ByID returns the schema of an id.
func (r *Registry) ByID(ctx context.Context, id int) (*Schema, error) {
	r.mu.RLock()
	s := r.byID[id]
	r.mu.RUnlock()
	if s != nil {
		r.m.hits.Inc()
		return s, nil
	}
	var got sr.Schema
	err := r.call(ctx, func(ctx context.Context) (err error) { got, err = r.cl.SchemaByID(ctx, id); return err })
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w", id, err)
	}
	s, err = compile(id, sr.SubjectSchema{ID: id, Schema: got})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.byID[id] = s
	r.mu.Unlock()
	return s, nil
}

// ByVersion returns a subject's version; version 0 is the latest, kept
// for LatestTTL and kept on past it while the registry does not answer.
func (r *Registry) ByVersion(ctx context.Context, subject string, version int) (*Schema, error) {
	now := time.Now()
	r.mu.RLock()
	var s *Schema
	stale := false
	if version == 0 {
		l, ok := r.latest[subject]
		s, stale = l.s, ok && now.Sub(l.fetched) > r.ttl
	} else {
		s = r.byVersion[subjectVersion{subject, version}]
	}
	r.mu.RUnlock()
	if s != nil && !stale {
		r.m.hits.Inc()
		return s, nil
	}
	fresh, err := r.fetchVersion(ctx, subject, version)
	if err != nil {
		if s != nil && outbox.IsUnavailable(err) {
			return s, nil // the known latest, until the registry answers
		}
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.byID[fresh.ID]; old != nil && old.Subject == fresh.Subject && old.Version == fresh.Version {
		fresh = old
	}
	r.byID[fresh.ID] = fresh
	r.byVersion[subjectVersion{subject, fresh.Version}] = fresh
	if version == 0 {
		r.latest[subject] = latestEntry{s: fresh, fetched: now}
	}
	return fresh, nil
}

func (r *Registry) fetchVersion(ctx context.Context, subject string, version int) (*Schema, error) {
	v := version
	if v == 0 {
		v = -1 // latest
	}
	var got sr.SubjectSchema
	err := r.call(ctx, func(ctx context.Context) (err error) { got, err = r.cl.SchemaByVersion(ctx, subject, v); return err })
	if err != nil {
		what := "latest version"
		if version != 0 {
			what = fmt.Sprintf("version %d", version)
		}
		return nil, fmt.Errorf("subject %s %s: %w", subject, what, err)
	}
	return compile(got.ID, got)
}

// call makes one request within the timeout, counted and timed, its error
// classified.
func (r *Registry) call(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	began := time.Now()
	err := fn(ctx)
	r.m.seconds.Observe(time.Since(began).Seconds())
	if err != nil {
		err = classify(err)
		if outbox.IsUnavailable(err) {
			r.m.requests.WithLabelValues("unavailable").Inc()
		} else {
			r.m.requests.WithLabelValues("not_found").Inc()
		}
		return err
	}
	r.m.requests.WithLabelValues("ok").Inc()
	return nil
}

// compile parses a registry schema in its type's codec.
func compile(id int, ss sr.SubjectSchema) (*Schema, error) {
	if len(ss.References) > 0 {
		return nil, fmt.Errorf("schema id %d has references, which are not supported", id)
	}
	s := &Schema{ID: id, Subject: ss.Subject, Version: ss.Version}
	var err error
	switch ss.Type {
	case sr.TypeAvro:
		s.Type = FormatAvro
		s.codec, err = newAvroCodec(ss.Schema.Schema)
	case sr.TypeProtobuf:
		s.Type = FormatProtobuf
		s.codec, err = newProtoCodec(ss.Schema.Schema)
	case sr.TypeJSON:
		s.Type = FormatJSONSchema
		s.codec, err = newJSONSchemaCodec(ss.Schema.Schema)
	default:
		err = fmt.Errorf("unknown schema type %s", ss.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("schema id %d: %w", id, err)
	}
	return s, nil
}

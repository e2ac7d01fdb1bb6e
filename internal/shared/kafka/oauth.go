package kafka

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// tokenTimeout bounds one fetch of a token (a command, the AWS signer):
// sarama asks for a token while it connects and must not hang.
const tokenTimeout = 30 * time.Second

// maxRefreshMargin is the most time before its expiry that a cached token
// is replaced; a token living less than five times this is replaced when a
// fifth of its life is left.
const maxRefreshMargin = 5 * time.Minute

// ErrTokenExpired is returned for a token whose exp claim has passed: the
// broker would refuse it.
var ErrTokenExpired = errors.New("kafka OAUTHBEARER token expired")

// fetchFunc fetches a token and when it expires (zero: unknown).
type fetchFunc func(ctx context.Context) (token string, expires time.Time, err error)

// tokenProvider is a sarama.AccessTokenProvider. With cache set it reuses a
// token until shortly before its expiry; without, it fetches on every call
// (each new connection and each re-authentication).
type tokenProvider struct {
	what  string // how errors name the source, e.g. "token file /run/token"
	fetch fetchFunc
	cache bool
	now   func() time.Time

	mu      sync.Mutex
	token   string
	fetched time.Time
	expires time.Time
}

func newTokenProvider(what string, fetch fetchFunc, cache bool) *tokenProvider {
	return &tokenProvider{what: what, fetch: fetch, cache: cache, now: time.Now}
}

// Token implements sarama.AccessTokenProvider.
func (p *tokenProvider) Token() (*sarama.AccessToken, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.cache && p.token != "" && !p.expires.IsZero() && now.Before(p.refreshAt()) {
		return &sarama.AccessToken{Token: p.token}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
	defer cancel()
	tok, exp, err := p.fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("get kafka OAUTHBEARER token from %s: %w", p.what, err)
	}
	if tok == "" {
		return nil, fmt.Errorf("get kafka OAUTHBEARER token from %s: empty token", p.what)
	}
	if !exp.IsZero() && !now.Before(exp) {
		return nil, fmt.Errorf("%w: the token from %s expired at %s", ErrTokenExpired, p.what, exp.UTC().Format(time.RFC3339))
	}
	p.token, p.fetched, p.expires = tok, now, exp
	return &sarama.AccessToken{Token: tok}, nil
}

// refreshAt is when the cached token is replaced.
func (p *tokenProvider) refreshAt() time.Time {
	margin := min(p.expires.Sub(p.fetched)/5, maxRefreshMargin)
	return p.expires.Add(-margin)
}

// fileToken reads the token from path on every call, so a token that an
// agent rewrites is picked up at the next connection or re-authentication.
func fileToken(path string) fetchFunc {
	return func(context.Context) (string, time.Time, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", time.Time{}, err
		}
		tok := strings.TrimSpace(string(b))
		return tok, jwtExpiry(tok), nil
	}
}

// commandToken runs command with /bin/sh -c; its stdout, trimmed, is the
// token. A failure reports the command's exit and the first line of its
// stderr, never its stdout (which may hold a token).
func commandToken(command string) fetchFunc {
	return func(ctx context.Context) (string, time.Time, error) {
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
			if len(line) > 200 {
				line = line[:200]
			}
			if line != "" {
				return "", time.Time{}, fmt.Errorf("%w: %s", err, line)
			}
			return "", time.Time{}, err
		}
		tok := strings.TrimSpace(stdout.String())
		return tok, jwtExpiry(tok), nil
	}
}

// maxExp is the largest exp claim taken (year 2262, where time.Unix in
// nanoseconds ends); a larger one counts as no expiry.
const maxExp = 9.2e9

// jwtExpiry is the exp claim of a JWT (signed or not), zero for anything
// else: an opaque token is never cached and never judged expired here.
func jwtExpiry(tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == "" {
		return time.Time{}
	}
	secs, err := claims.Exp.Float64()
	if err != nil || secs < 1 || secs > maxExp {
		return time.Time{}
	}
	return time.Unix(0, int64(secs*float64(time.Second)))
}

package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
)

// Limits on the bearer token.
const (
	minTokenLen = 16
	maxTokenLen = 4096
)

// Token is the API's bearer token. Its String, GoString, LogValue and
// MarshalText hide it, so that printing, logging or encoding a Config never
// shows the secret.
type Token string

const redacted = "[redacted]"

func (Token) String() string { return redacted }

// GoString hides the token from %#v.
func (Token) GoString() string { return redacted }

// LogValue hides the token from log/slog.
func (Token) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText hides the token from encoders (JSON logs of a whole Config).
func (Token) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// validate checks that the token can travel in an Authorization header and
// is long enough not to be guessed. Its errors never quote the token.
func (t Token) validate() error {
	if len(t) < minTokenLen || len(t) > maxTokenLen {
		return fmt.Errorf("invalid API token: want %d to %d characters, got %d", minTokenLen, maxTokenLen, len(t))
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 0x21 || t[i] > 0x7e {
			return fmt.Errorf("invalid API token: character %d is not visible ASCII", i+1)
		}
	}
	return nil
}

// ReadTokenFile reads a bearer token from path (as --api-token-file gives
// it); surrounding whitespace, such as a final newline, is dropped.
func ReadTokenFile(path string) (Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The os error names the path, never the contents.
		return "", fmt.Errorf("read API token file: %w", err)
	}
	t := Token(strings.TrimSpace(string(b)))
	if t == "" {
		return "", fmt.Errorf("read API token file %s: it is empty", path)
	}
	if err := t.validate(); err != nil {
		return "", fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// requireToken lets a request through when no token is configured or when it
// carries "Authorization: Bearer <token>"; otherwise it answers 401.
func (s *Server) requireToken(next http.HandlerFunc) http.HandlerFunc {
	if s.cfg.Token == "" {
		return next
	}
	// Comparing digests keeps the comparison constant-time in the length too.
	want := sha256.Sum256([]byte(s.cfg.Token))
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r.Header)
		if ok {
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
				next(w, r)
				return
			}
		}
		s.metrics.authFailures.Inc()
		challenge := `Bearer realm="eventforge"`
		if ok {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
	}
}

// bearerToken returns the credentials of a single "Authorization: Bearer"
// header (the scheme is case-insensitive, RFC 9110 section 11.1).
func bearerToken(h http.Header) (string, bool) {
	vs := h.Values("Authorization")
	if len(vs) != 1 {
		return "", false
	}
	scheme, cred, found := strings.Cut(vs[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimLeft(cred, " ")
	return cred, cred != ""
}

// errTokenConflict is returned when both token sources are set.
var errTokenConflict = errors.New("set --api-token or --api-token-file, not both")

// ResolveToken returns the token from the flag value or, when file is set,
// from the file; setting both is an error.
func ResolveToken(flag, file string) (Token, error) {
	switch {
	case flag != "" && file != "":
		return "", errTokenConflict
	case file != "":
		return ReadTokenFile(file)
	default:
		return Token(flag), nil
	}
}

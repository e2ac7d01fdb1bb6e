package api

import (
	"errors"
	"net/http"

	"github.com/eventforge/eventforge/internal/shared/secret"
)

// Token is the API's bearer token. Its String, GoString, LogValue and
// MarshalText hide it, so that printing, logging or encoding a Config never
// shows the secret.
type Token = secret.Token

// ReadTokenFile reads a bearer token from path (as --api-token-file gives
// it); surrounding whitespace, such as a final newline, is dropped.
func ReadTokenFile(path string) (Token, error) { return secret.ReadTokenFile(path, "API token") }

// requireToken lets a request through when no token is configured or when it
// carries "Authorization: Bearer <token>"; otherwise it answers 401.
func (s *Server) requireToken(next http.HandlerFunc) http.HandlerFunc {
	if s.cfg.Token == "" {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := secret.BearerToken(r.Header)
		if ok && s.cfg.Token.Matches(got) {
			next(w, r)
			return
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

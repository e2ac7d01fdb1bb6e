// Package secret holds what the commands share about secrets: a bearer
// token that never prints, the check of a bearer token in a request, and the
// check that a file holding a secret is private to its owner.
//
// Imports (floor: shared library): no other EventForge package.
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
)

// Limits on a bearer token.
const (
	minTokenLen = 16
	maxTokenLen = 4096
)

// Token is a bearer token. Its String, GoString, LogValue and MarshalText
// hide it, so that printing, logging or encoding a configuration never shows
// the secret.
type Token string

const redacted = "[redacted]"

func (Token) String() string { return redacted }

// GoString hides the token from %#v.
func (Token) GoString() string { return redacted }

// LogValue hides the token from log/slog.
func (Token) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText hides the token from encoders (JSON logs of a whole Config).
func (Token) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Validate checks that the token can travel in an Authorization header and
// is long enough not to be guessed; what names it in errors ("API token").
// Its errors never quote the token.
func (t Token) Validate(what string) error {
	if len(t) < minTokenLen || len(t) > maxTokenLen {
		return fmt.Errorf("invalid %s: want %d to %d characters, got %d", what, minTokenLen, maxTokenLen, len(t))
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 0x21 || t[i] > 0x7e {
			return fmt.Errorf("invalid %s: character %d is not visible ASCII", what, i+1)
		}
	}
	return nil
}

// Matches reports in constant time (in the length too: digests are
// compared) whether got is the token.
func (t Token) Matches(got string) bool {
	want := sha256.Sum256([]byte(t))
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// ReadTokenFile reads a bearer token from path; surrounding whitespace, such
// as a final newline, is dropped. what names it in errors ("API token").
func ReadTokenFile(path, what string) (Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The os error names the path, never the contents.
		return "", fmt.Errorf("read %s file: %w", what, err)
	}
	t := Token(strings.TrimSpace(string(b)))
	if t == "" {
		return "", fmt.Errorf("read %s file %s: it is empty", what, path)
	}
	if err := t.Validate(what); err != nil {
		return "", fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// BearerToken returns the credentials of a single "Authorization: Bearer"
// header (the scheme is case-insensitive, RFC 9110 section 11.1).
func BearerToken(h http.Header) (string, bool) {
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

// ErrFileTooOpen is wrapped by CheckFile when group or others may read or
// write a secret file.
var ErrFileTooOpen = errors.New("readable or writable by group or others: want mode 0600 (chmod 600)")

// CheckFile returns an error wrapping ErrFileTooOpen when path's permission
// bits give group or others any access. One layout passes although its group
// may read: a file of root's whose group is this process's own group and
// that others cannot read, which is how Kubernetes mounts a Secret for a
// non-root pod (group fsGroup, mode 0440). A file that cannot be examined is
// left to the read that follows, which reports it.
func CheckFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	perm := st.Mode().Perm()
	if perm&0o077 == 0 || perm&0o037 == 0 && ownGroupOfRoot(st) {
		return nil
	}
	return fmt.Errorf("secret file %s has mode %04o: %w", path, perm, ErrFileTooOpen)
}

// ownGroupOfRoot reports a file owned by root whose group is the process's.
func ownGroupOfRoot(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Uid == 0 && int(sys.Gid) == os.Getgid() && os.Getuid() != 0
}

// FileChecker applies CheckFile to the secret files a command reads: it
// logs one warning line per file that others can read, or refuses it when
// Strict.
type FileChecker struct {
	// Strict refuses a file that others can read instead of warning.
	Strict bool
	// Log receives the warnings. Default: slog.Default().
	Log *slog.Logger
}

// Check checks each named file (flag name → path; empty paths are skipped).
func (c FileChecker) Check(files map[string]string) error {
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	var errs []error
	for flag, path := range files {
		if path == "" {
			continue
		}
		err := CheckFile(path)
		switch {
		case err == nil:
		case c.Strict:
			errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
		default:
			var mode fs.FileMode
			if st, serr := os.Stat(path); serr == nil {
				mode = st.Mode().Perm()
			}
			log.Warn("secret file is readable by group or others; chmod 600 it (--strict-file-modes refuses it)",
				"flag", "--"+flag, "path", path, "mode", fmt.Sprintf("%04o", mode))
		}
	}
	return errors.Join(errs...)
}

// LoopbackOnly reports whether a listen address (host:port) reaches only
// this machine: localhost or a loopback IP. An empty host or 0.0.0.0 listens
// on every interface.
func LoopbackOnly(addr string) bool {
	h := addr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		h = host
	}
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

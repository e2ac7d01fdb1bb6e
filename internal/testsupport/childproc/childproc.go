// Package childproc is what a test or a tool gives the EventForge processes
// it starts: an environment without EVENTFORGE_ variables, so that only the
// flags it passes configure them, and a free loopback address for each to
// listen on.
//
// Imports (floor: test support): the standard library only.
package childproc

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// EnvPrefix starts the name of every EventForge variable.
const EnvPrefix = "EVENTFORGE_"

// Env is this process's environment without EVENTFORGE_ variables (and so
// without failpoints).
func Env() []string { return WithoutEventForge(os.Environ()) }

// WithoutEventForge is env without its EVENTFORGE_ variables, in a new
// slice.
func WithoutEventForge(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvPrefix) {
			out = append(out, kv)
		}
	}
	return out
}

// FreeAddr is a loopback host:port that nothing listened on a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runRoot runs the command tree in process with a deadline; stderr is
// returned with the error.
func runRoot(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	_, stderr, err := execRoot(timeout, args...)
	return stderr, err
}

// runRootOut is runRoot returning stdout.
func runRootOut(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	out, _, err := execRoot(timeout, args...)
	return out, err
}

func execRoot(timeout time.Duration, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	root := newRootCmd()
	var out, stderr bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), stderr.String(), err
}

func writeSecret(t *testing.T, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte("secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecretFilesOthersCanReadAreFlagged: a token or password file that
// group or others may read gets one warning line, or is refused with
// --strict-file-modes; a 0600 file gets neither.
func TestSecretFilesOthersCanReadAreFlagged(t *testing.T) {
	t.Parallel()
	const pgURL = "postgres://u@127.0.0.1:1/db"
	kafkaPw := func(f string) []string {
		return []string{"--kafka-brokers", "127.0.0.1:1", "--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-user", "u", "--kafka-sasl-password-file", f}
	}
	tests := []struct {
		name   string
		mode   os.FileMode
		strict bool
		args   func(file string) []string
		flag   string
	}{
		// --pg-max-conns 0 stops api run right after the file check, before any connection.
		{"api token", 0o644, false, func(f string) []string {
			return []string{"api", "run", "--pg-url", pgURL, "--pg-max-conns", "0", "--api-token-file", f}
		}, "--api-token-file"},
		{"api token strict", 0o644, true, func(f string) []string {
			return []string{"api", "run", "--pg-url", pgURL, "--pg-max-conns", "0", "--api-token-file", f}
		}, "--api-token-file"},
		{"api token private", 0o600, true, func(f string) []string {
			return []string{"api", "run", "--pg-url", pgURL, "--pg-max-conns", "0", "--api-token-file", f}
		}, ""},
		{"console token strict", 0o640, true, func(f string) []string {
			return []string{"console", "--pg-url", pgURL, "--kafka-brokers", "127.0.0.1:1", "--console-token-file", f}
		}, "--console-token-file"},
		{"kafka password", 0o604, false, func(f string) []string {
			return append([]string{"dlq", "list", "--topic", "t.dlq"}, kafkaPw(f)...)
		}, "--kafka-sasl-password-file"},
		{"kafka password strict", 0o604, true, func(f string) []string {
			return append([]string{"dlq", "list", "--topic", "t.dlq"}, kafkaPw(f)...)
		}, "--kafka-sasl-password-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args(writeSecret(t, tt.mode))
			if tt.strict {
				args = append(args, "--strict-file-modes")
			}
			stderr, err := runRoot(t, 5*time.Second, args...)
			switch {
			case tt.flag == "":
				if strings.Contains(stderr, "secret file") || err != nil && strings.Contains(err.Error(), "secret file") {
					t.Fatalf("a 0600 file was flagged: %v\n%s", err, stderr)
				}
			case tt.strict:
				if err == nil || !strings.Contains(err.Error(), tt.flag) || !strings.Contains(err.Error(), "chmod 600") {
					t.Fatalf("strict: err %v, want a refusal naming %s", err, tt.flag)
				}
			default:
				if n := strings.Count(stderr, "secret file is readable by group or others"); n != 1 || !strings.Contains(stderr, tt.flag) {
					t.Fatalf("want one warning line naming %s, got:\n%s", tt.flag, stderr)
				}
			}
		})
	}
}

// TestUnauthenticatedListenersBeyondLoopbackWarn: api run without a token on
// every interface says so in one line; on loopback it says nothing.
func TestUnauthenticatedListenersBeyondLoopbackWarn(t *testing.T) {
	t.Parallel()
	const warn = "serves without authentication beyond loopback"
	for _, tc := range []struct {
		addr string
		want int
	}{{"0.0.0.0:0", 1}, {"127.0.0.1:0", 0}} {
		stderr, _ := runRoot(t, 3*time.Second, "api", "run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--http-addr", tc.addr)
		if n := strings.Count(stderr, warn); n != tc.want {
			t.Errorf("api run --http-addr %s: %d warning lines, want %d:\n%s", tc.addr, n, tc.want, stderr)
		}
	}
}

// TestAllowedTopicsFlagReachesTheRelay: an invalid pattern stops cdc run
// before it connects, naming the flag.
func TestAllowedTopicsFlagReachesTheRelay(t *testing.T) {
	_, err := runRoot(t, 5*time.Second, "cdc", "run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1", "--allowed-topics", "shop.orders,shop.pay[")
	if err == nil || !strings.Contains(err.Error(), "--allowed-topics") || !strings.Contains(err.Error(), `"shop.pay["`) {
		t.Fatalf("err = %v, want the invalid --allowed-topics pattern named", err)
	}
}

// TestIdempotencyTTLFlagReachesTheAPI: an invalid TTL stops api run before
// it connects, naming the flag.
func TestIdempotencyTTLFlagReachesTheAPI(t *testing.T) {
	_, err := runRoot(t, 5*time.Second, "api", "run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--idempotency-ttl", "0s")
	if err == nil || !strings.Contains(err.Error(), "--idempotency-ttl") {
		t.Fatalf("err = %v, want --idempotency-ttl named", err)
	}
}

package api

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestBinaryServesAndExitsZeroOnSIGTERM runs `eventforge api run` configured
// through EVENTFORGE_* variables and a flag, writes an order through it and
// stops it with SIGTERM.
func TestBinaryServesAndExitsZeroOnSIGTERM(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	bin := testenv.Binary(t)
	httpAddr, metricsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)

	cmd := exec.Command(bin, "api", "run", "--metrics-addr", metricsAddr, "--log-format", "json")
	cmd.Env = append(os.Environ(), "EVENTFORGE_PG_URL="+dbURL, "EVENTFORGE_HTTP_ADDR="+httpAddr)
	exited, stderr := startAPI(t, cmd)

	waitReady(t, "http://"+httpAddr+"/readyz", exited)
	waitReady(t, "http://"+metricsAddr+"/readyz", exited)
	r := do(t, mustRequest(t, http.MethodPost, "http://"+httpAddr+"/orders", orderBody("bin-1", "Ada", 5, "EUR")))
	if r.status != http.StatusCreated {
		t.Fatalf("POST through the binary: %d %s", r.status, r.body)
	}
	if r := do(t, mustRequest(t, http.MethodGet, "http://"+metricsAddr+"/metrics", "")); !bytes.Contains(r.body, []byte(`eventforge_api_requests_total{code="201",route="POST /orders"} 1`)) {
		t.Errorf("metrics on --metrics-addr lack the POST:\n%s", r.body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit 20 s after SIGTERM; stderr:\n%s", stderr.String())
	}
}

// startAPI starts cmd, an `eventforge api run`, and kills it at cleanup if it
// is still running. exited gets its Wait result; stderr collects its log.
func startAPI(t *testing.T, cmd *exec.Cmd) (exited chan error, stderr *testenv.Buffer) {
	t.Helper()
	stderr = &testenv.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return exited, stderr
}

func waitReady(t *testing.T, url string, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("eventforge exited early: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 20 s (last error %v)", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBinaryConfigErrors: configuration errors exit 1 with one line on
// stderr that never repeats a password.
func TestBinaryConfigErrors(t *testing.T) {
	t.Parallel()
	bin := testenv.Binary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	const password = "pw-Secret-42"
	okURL := "postgres://eventforge:" + password + "@127.0.0.1:1/eventforge"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no url", []string{}, "no PostgreSQL URL"},
		{"bad url", []string{"--pg-url", "postgres://eventforge:" + password + "@host:notaport/db"}, "invalid PostgreSQL URL"},
		{"bad http addr", []string{"--pg-url", okURL, "--http-addr", "nope"}, "--http-addr: invalid address"},
		{"bad metrics addr", []string{"--pg-url", okURL, "--metrics-addr", "9090"}, "--metrics-addr: invalid address"},
		{"timeouts", []string{"--pg-url", okURL, "--request-timeout", "30s"}, "--write-timeout: 20s must exceed --request-timeout 30s"},
		{"port in use", []string{"--pg-url", okURL, "--http-addr", busy.Addr().String()}, "listen on"},
		{"bad log level", []string{"--pg-url", okURL, "--log-level", "loud"}, "invalid --log-level"},
		{"token and token file", []string{"--pg-url", okURL, "--api-token", password + "-0123456789", "--api-token-file", "/nope"}, "not both"},
		{"short token", []string{"--pg-url", okURL, "--api-token", password}, "invalid API token"},
		{"missing token file", []string{"--pg-url", okURL, "--api-token-file", "/nonexistent/token"}, "read API token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"api", "run"}, tt.args...)...)
			cmd.Env = childproc.Env()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("err = %v, want exit status 1; stderr %q", err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "eventforge: ") || !strings.Contains(last, tt.want) {
				t.Errorf("last stderr line %q, want eventforge: …%s…", last, tt.want)
			}
			if strings.Contains(stderr.String(), password) {
				t.Errorf("stderr leaks the password: %q", stderr.String())
			}
		})
	}
}

// TestBinaryBearerTokenFromFile runs `eventforge api run` with the token in
// a file named by EVENTFORGE_API_TOKEN_FILE: /orders needs it, /healthz does
// not, and neither the log nor --help ever shows it.
func TestBinaryBearerTokenFromFile(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	bin := testenv.Binary(t)
	const token = "bin-Token-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := testenv.FreeAddr(t)
	cmd := exec.Command(bin, "api", "run", "--log-level", "debug")
	cmd.Env = append(childproc.Env(), "EVENTFORGE_PG_URL="+dbURL,
		"EVENTFORGE_HTTP_ADDR="+httpAddr, "EVENTFORGE_API_TOKEN_FILE="+tokenFile)
	exited, stderr := startAPI(t, cmd)
	waitReady(t, "http://"+httpAddr+"/readyz", exited)

	base := "http://" + httpAddr
	tests := []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer " + token + "-not", http.StatusUnauthorized},
		{"token", "Bearer " + token, http.StatusCreated},
	}
	for _, tt := range tests {
		req := mustRequest(t, http.MethodPost, base+"/orders", orderBody("", "Ada", 5, "EUR"))
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		if r := do(t, req); r.status != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.body, tt.want)
		}
	}
	if r := do(t, mustRequest(t, http.MethodGet, base+"/healthz", "")); r.status != http.StatusOK {
		t.Errorf("/healthz without a token: %d", r.status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("exit after SIGTERM: %v; stderr:\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), token) {
		t.Errorf("the log shows the token:\n%s", stderr.String())
	}

	help := exec.Command(bin, "api", "run", "--help")
	help.Env = append(childproc.Env(), "EVENTFORGE_API_TOKEN="+token)
	out, err := help.CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	if strings.Contains(string(out), token) || !strings.Contains(string(out), "--api-token-file") {
		t.Errorf("--help shows the token or lacks the flags:\n%s", out)
	}
}

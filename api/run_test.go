package api

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testenv"
)

// TestBinaryServesAndExitsZeroOnSIGTERM runs `eventforge api run` configured
// through EVENTFORGE_* variables and a flag, writes an order through it and
// stops it with SIGTERM.
func TestBinaryServesAndExitsZeroOnSIGTERM(t *testing.T) {
	t.Parallel()
	dbURL := newDatabase(t)
	bin := testenv.Binary(t)
	httpAddr, metricsAddr := freeAddr(t), freeAddr(t)

	cmd := exec.Command(bin, "api", "run", "--metrics-addr", metricsAddr, "--log-format", "json")
	cmd.Env = append(os.Environ(), "EVENTFORGE_PG_URL="+dbURL, "EVENTFORGE_HTTP_ADDR="+httpAddr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

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
		{"bad http addr", []string{"--pg-url", okURL, "--http-addr", "nope"}, "invalid --http-addr"},
		{"bad metrics addr", []string{"--pg-url", okURL, "--metrics-addr", "9090"}, "invalid --metrics-addr"},
		{"timeouts", []string{"--pg-url", okURL, "--request-timeout", "30s"}, "must exceed request timeout"},
		{"port in use", []string{"--pg-url", okURL, "--http-addr", busy.Addr().String()}, "listen on"},
		{"bad log level", []string{"--pg-url", okURL, "--log-level", "loud"}, "invalid --log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"api", "run"}, tt.args...)...)
			cmd.Env = withoutEventforgeEnv(os.Environ())
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

func withoutEventforgeEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "EVENTFORGE_") {
			out = append(out, kv)
		}
	}
	return out
}

package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

const testToken = "tok-Secret-0123456789abcdef"

// TestBearerToken: with a token, the /orders routes answer 401 (JSON, with a
// Bearer challenge, writing nothing) unless the request carries it; health,
// metrics and the document stay open.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	a := newTestAPI(t, func(_ *pgStore, c *Config) { c.Token = testToken })
	a.srv.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	body := orderBody("", "Ada", 1, "EUR")
	tests := []struct {
		name, method, path, auth string // auth "-" sends no header
		want                     int
		challenge                string
	}{
		{"post without token", "POST", "/orders", "-", 401, `Bearer realm="eventforge"`},
		{"post empty bearer", "POST", "/orders", "Bearer ", 401, `Bearer realm="eventforge"`},
		{"post wrong token", "POST", "/orders", "Bearer " + testToken + "x", 401, `Bearer realm="eventforge", error="invalid_token"`},
		{"post token prefix", "POST", "/orders", "Bearer " + testToken[:len(testToken)-1], 401, `Bearer realm="eventforge", error="invalid_token"`},
		{"post basic scheme", "POST", "/orders", "Basic " + testToken, 401, `Bearer realm="eventforge"`},
		{"post raw token", "POST", "/orders", testToken, 401, `Bearer realm="eventforge"`},
		{"get without token", "GET", "/orders/x", "-", 401, `Bearer realm="eventforge"`},
		{"post with token", "POST", "/orders", "Bearer " + testToken, 201, ""},
		{"post lower-case scheme", "POST", "/orders", "bearer " + testToken, 201, ""},
		{"get with token", "GET", "/orders/missing", "Bearer " + testToken, 404, ""},
		{"healthz open", "GET", "/healthz", "-", 200, ""},
		{"readyz open", "GET", "/readyz", "-", 200, ""},
		{"metrics open", "GET", "/metrics", "-", 200, ""},
		{"openapi open", "GET", "/openapi.json", "-", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := a.counts(t)
			b := ""
			if tt.method == http.MethodPost {
				b = body
			}
			req := mustRequest(t, tt.method, a.url+tt.path, b)
			if tt.auth != "-" {
				req.Header.Set("Authorization", tt.auth)
			}
			r := do(t, req)
			if r.status != tt.want || r.header.Get("WWW-Authenticate") != tt.challenge {
				t.Fatalf("%d WWW-Authenticate %q (%s), want %d %q", r.status, r.header.Get("WWW-Authenticate"), r.body, tt.want, tt.challenge)
			}
			if bytes.Contains(r.body, []byte(testToken)) {
				t.Errorf("answer carries the token: %s", r.body)
			}
			if tt.want == http.StatusUnauthorized {
				if r.json(t)["error"] != "missing or invalid bearer token" {
					t.Errorf("answer %s", r.body)
				}
				if after := a.counts(t); after != before {
					t.Errorf("a refused request wrote rows: %+v → %+v", before, after)
				}
			}
		})
	}
	if m := string(a.get(t, "/metrics").body); !strings.Contains(m, "eventforge_api_auth_failures_total 7") {
		t.Errorf("metrics lack 7 auth failures")
	}
	if strings.Contains(logs.String(), testToken) {
		t.Errorf("logs carry the token:\n%s", logs.String())
	}
}

// TestTokenSources: --api-token / --api-token-file resolution, and that no
// error or printed Config ever shows the token.
func TestTokenSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", testToken+"\n")
	tests := []struct {
		name, flag, file string
		want             Token
		wantErr          string
	}{
		{"none", "", "", "", ""},
		{"flag", testToken, "", testToken, ""},
		{"file with newline", "", good, testToken, ""},
		{"both", testToken, good, "", "not both"},
		{"missing file", "", filepath.Join(dir, "nope"), "", "no such file"},
		{"empty file", "", write("empty", " \n"), "", "is empty"},
		{"short token in file", "", write("short", "tok-Secret-x\n"), "", "16 to 4096"},
		{"space in token", "", write("space", "tok-Secret 0123456789abcdef"), "", "not visible ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveToken(tt.flag, tt.file)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ResolveToken = %v (len %d), %v", got, len(got), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "tok-Secret") {
				t.Errorf("error shows the token: %v", err)
			}
		})
	}

	cfg := DefaultConfig()
	cfg.Token = "tok-Secret"
	if err := cfg.Validate(); err == nil || strings.Contains(err.Error(), "tok-Secret") {
		t.Errorf("short token: Validate = %v, want an error without the token", err)
	}
	cfg.Token = testToken
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", cfg, "token", cfg.Token)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.Token), logged.String()} {
		if strings.Contains(s, "tok-Secret") {
			t.Errorf("printed config shows the token: %s", s)
		}
	}
}

// panicWriter panics between the two inserts of the transaction.
type panicWriter struct{ rowWriter }

func (panicWriter) insertEvent(context.Context, pgx.Tx, uuid.UUID, orderRequest, []byte, []byte) error {
	panic("injected panic with " + testToken)
}

// TestPanicAnswers500WithoutDetails: a handler panic answers a bare 500
// JSON error, rolls back, is logged with its stack (without the request's
// Authorization header) and leaves the server serving.
func TestPanicAnswers500WithoutDetails(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	a := newTestAPI(t, func(s *pgStore, c *Config) { s.w = panicWriter{sqlWriter{}}; c.Token = testToken })
	a.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	r := a.post(t, orderBody("p-1", "Ada", 1, "EUR"), "Authorization", "Bearer "+testToken)
	if r.status != http.StatusInternalServerError || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %s, want a 500 JSON answer", r.status, r.header.Get("Content-Type"), r.body)
	}
	if m := r.json(t); m["error"] != "internal error" || len(m) != 1 {
		t.Errorf("answer %s, want {\"error\":\"internal error\"}", r.body)
	}
	for _, leak := range []string{"goroutine", ".go:", "panic", testToken} {
		if bytes.Contains(r.body, []byte(leak)) {
			t.Errorf("answer leaks %q: %s", leak, r.body)
		}
	}
	if c := a.counts(t); c != (rowCounts{}) {
		t.Errorf("rows after the panic: %+v, want none", c)
	}
	log := logs.String()
	if !strings.Contains(log, "handler panicked") || !strings.Contains(log, "goroutine") {
		t.Errorf("the panic and its stack are not logged:\n%s", log)
	}
	if strings.Contains(log, "Bearer") || strings.Contains(log, testToken) {
		t.Errorf("the log carries the Authorization header or the token:\n%s", log)
	}
	if r := a.get(t, "/healthz"); r.status != http.StatusOK {
		t.Errorf("after the panic: /healthz %d", r.status)
	}
	if m := string(a.get(t, "/metrics").body); !strings.Contains(m, "eventforge_api_panics_total 1") ||
		!strings.Contains(m, `eventforge_api_requests_total{code="500",route="POST /orders"} 1`) {
		t.Errorf("metrics do not count the panic")
	}
}

// TestWrongMethodAnswers405: every documented path answers other methods
// with a JSON 405 and its Allow header; unknown paths a JSON 404.
func TestWrongMethodAnswers405(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	tests := []struct {
		method, path string
		want         int
		allow        string
	}{
		{"GET", "/orders", 405, "POST"},
		{"PUT", "/orders", 405, "POST"},
		{"DELETE", "/orders/x", 405, "GET, HEAD"},
		{"POST", "/orders/x", 405, "GET, HEAD"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"POST", "/readyz", 405, "GET, HEAD"},
		{"DELETE", "/metrics", 405, "GET, HEAD"},
		{"PUT", "/openapi.json", 405, "GET, HEAD"},
		{"OPTIONS", "/orders", 405, "POST"},
		{"GET", "/orders/", 404, ""},
		{"GET", "/orders/a/b", 404, ""},
		{"GET", "/openapi.yaml", 404, ""},
	}
	for _, tt := range tests {
		req := mustRequest(t, tt.method, a.url+tt.path, "")
		r := do(t, req)
		if r.status != tt.want || r.header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d Allow=%q, want %d Allow=%q", tt.method, tt.path, r.status, r.header.Get("Allow"), tt.want, tt.allow)
			continue
		}
		if msg, _ := r.json(t)["error"].(string); msg == "" {
			t.Errorf("%s %s: answer %s, want a JSON error", tt.method, tt.path, r.body)
		}
	}
}

// TestServerLimits runs the real http.Server (serve) with small limits: a
// client too slow to send its headers is cut off, oversized headers answer
// 431, a body over --max-body-bytes answers 413 and writes nothing, and the
// request timeout answers 503 and writes nothing.
func TestServerLimits(t *testing.T) {
	t.Parallel()
	g := newGateWriter() // never released: only the request deadline ends it
	a := newTestAPI(t, func(s *pgStore, c *Config) {
		s.w = g
		c.ReadHeaderTimeout = 300 * time.Millisecond
		c.MaxHeaderBytes = 4 << 10
		c.MaxBodyBytes = 200
		c.RequestTimeout = 500 * time.Millisecond
	})
	base := serveReal(t, a)

	t.Run("slow headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		// The server must close the connection by itself; the deadline here
		// only bounds a broken server.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(conn)
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatal("the server kept a connection that never finished its headers")
		}
	})

	tests := []struct {
		name   string
		header string // one extra header's value size
		body   string
		want   int
	}{
		{"headers over the limit", strings.Repeat("h", 16<<10), orderBody("", "Ada", 1, "EUR"), 431},
		{"body over the limit", "", `{"customer":"` + strings.Repeat("x", 200) + `","amount":1,"currency":"EUR"}`, 413},
		{"body at the limit is read", "", orderBody("", strings.Repeat("x", 120), 1, "EUR"), 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := mustRequest(t, http.MethodPost, base+"/orders", tt.body)
			if tt.header != "" {
				req.Header.Set("X-Padding", tt.header)
			}
			r := do(t, req)
			if r.status != tt.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tt.want)
			}
			if tt.want != 431 { // net/http answers 431 itself, in text
				if msg, _ := r.json(t)["error"].(string); msg == "" {
					t.Errorf("answer %s, want a JSON error", r.body)
				}
			}
		})
	}
	if c := a.counts(t); c != (rowCounts{}) {
		t.Fatalf("rows %+v, want none", c)
	}
}

// serveReal serves a's Server on a real listener with its http.Server
// settings until the test ends.
func serveReal(t *testing.T, a *testAPI) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.srv.serve(ctx, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

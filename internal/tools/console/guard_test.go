package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/secret"
)

func send(h http.Handler, method, path, host string, hdr map[string]string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(`{"scenario":"relay-crash"}`))
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	h.ServeHTTP(rec, req)
	return rec
}

// TestConsoleRefusesOtherHostNames is a DNS-rebinding page's request: its
// own name as Host and a matching Origin. No handler may run for it.
func TestConsoleRefusesOtherHostNames(t *testing.T) {
	tests := []struct {
		name, bind string
		allowed    []string
		host       string
		want       int
	}{
		{"rebinding name", "127.0.0.1:8088", nil, "attacker.example:8088", http.StatusMisdirectedRequest},
		{"rebinding name, bound everywhere", "0.0.0.0:8088", nil, "attacker.example:8088", http.StatusMisdirectedRequest},
		{"subdomain of localhost", "127.0.0.1:8088", nil, "localhost.attacker.example:8088", http.StatusMisdirectedRequest},
		{"no host", "127.0.0.1:8088", nil, "", http.StatusMisdirectedRequest},
		{"bind address", "127.0.0.1:8088", nil, "127.0.0.1:8088", http.StatusOK},
		{"localhost", "127.0.0.1:8088", nil, "LocalHost.:8088", http.StatusOK},
		{"IPv6 loopback", "127.0.0.1:8088", nil, "[::1]:8088", http.StatusOK},
		{"other loopback", "127.0.0.1:8088", nil, "127.0.0.2:8088", http.StatusOK},
		{"allowed name", "10.0.0.5:8088", []string{"console.internal"}, "console.internal", http.StatusOK},
		{"allowed name with port", "10.0.0.5:8088", []string{"console.internal:443"}, "console.internal:8088", http.StatusOK},
		{"bound address", "10.0.0.5:8088", nil, "10.0.0.5:8088", http.StatusOK},
		{"another address", "10.0.0.5:8088", nil, "10.0.0.6:8088", http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := pageConsole()
			c.cfg.HTTPAddr, c.cfg.AllowedHosts = tt.bind, tt.allowed
			h := c.Handler()
			origin := map[string]string{"Origin": "http://" + tt.host}
			for _, path := range []string{"/api/info", "/api/processes", "/api/run", "/"} {
				if rec := send(h, http.MethodGet, path, tt.host, origin); rec.Code != tt.want {
					t.Errorf("GET %s Host %q: %d, want %d", path, tt.host, rec.Code, tt.want)
				}
			}
			if tt.want != http.StatusOK {
				for _, path := range []string{"/api/order?id=1", "/api/run/stop"} {
					if rec := send(h, http.MethodPost, path, tt.host, origin); rec.Code != tt.want {
						t.Errorf("POST %s Host %q: %d, want %d", path, tt.host, rec.Code, tt.want)
					}
				}
			}
		})
	}
}

func TestConsoleTokenIsRequiredWhenSet(t *testing.T) {
	const tok = "console-token-0123456789"
	c := pageConsole()
	c.cfg.HTTPAddr, c.cfg.Token = "127.0.0.1:8088", secret.Token(tok)
	h := c.Handler()
	const host = "127.0.0.1:8088"
	if rec := send(h, http.MethodGet, "/api/info", host, nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", rec.Code)
	}
	if rec := send(h, http.MethodGet, "/api/info", host, map[string]string{"Authorization": "Bearer wrong-token-0123456789"}); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", rec.Code)
	}
	if rec := send(h, http.MethodGet, "/api/info", host, map[string]string{"Authorization": "Bearer " + tok}); rec.Code != http.StatusOK {
		t.Fatalf("bearer token: %d", rec.Code)
	}
	if rec := send(h, http.MethodGet, "/?token=wrong-token-0123456789", host, nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong ?token=: %d", rec.Code)
	}
	rec := send(h, http.MethodGet, "/steps?scenario=journey&token="+tok, host, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/steps?scenario=journey" {
		t.Fatalf("?token=: %d to %q, want 303 to the URL without the token", rec.Code, rec.Header().Get("Location"))
	}
	cookie := rec.Result().Cookies()
	if len(cookie) != 1 || cookie[0].Name != sessionCookie || strings.Contains(cookie[0].Value, tok) || !cookie[0].HttpOnly || cookie[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", cookie)
	}
	if rec := send(h, http.MethodGet, "/api/info", host, map[string]string{"Cookie": sessionCookie + "=" + cookie[0].Value}); rec.Code != http.StatusOK {
		t.Fatalf("session cookie: %d", rec.Code)
	}
	if rec := send(h, http.MethodGet, "/api/info", host, map[string]string{"Cookie": sessionCookie + "=00"}); rec.Code != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %d", rec.Code)
	}
	// The host check comes first: a rebinding page with the cookie gets nothing.
	if rec := send(h, http.MethodGet, "/api/info", "attacker.example:8088", map[string]string{"Authorization": "Bearer " + tok}); rec.Code != http.StatusMisdirectedRequest {
		t.Fatalf("other host with the token: %d", rec.Code)
	}
}

func TestConfigNeedsATokenBeyondLoopback(t *testing.T) {
	base := DefaultConfig()
	base.PGURL, base.Kafka = "postgres://x/y", kafka.Config{Brokers: []string{"k:9092"}}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"loopback, no token", func(*Config) {}, ""},
		{"localhost, no token", func(c *Config) { c.HTTPAddr = "localhost:8088" }, ""},
		{"every interface, no token", func(c *Config) { c.HTTPAddr = ":8088" }, "--console-token"},
		{"LAN address, no token", func(c *Config) { c.HTTPAddr = "10.0.0.5:8088" }, "--insecure-no-auth"},
		{"LAN address, insecure", func(c *Config) { c.HTTPAddr, c.InsecureNoAuth = "10.0.0.5:8088", true }, ""},
		{"LAN address, token", func(c *Config) { c.HTTPAddr, c.Token = "10.0.0.5:8088", "console-token-0123456789" }, ""},
		{"short token", func(c *Config) { c.Token = "short" }, "invalid console token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestOrderLookupsAreBounded: a lookup reads Kafka, so one runs at a time
// and their starts are spaced; a lookup that cannot get its turn within the
// wait gets 429 instead of queueing longer.
func TestOrderLookupsAreBounded(t *testing.T) {
	l := newLookupLimiter(time.Second, 50*time.Millisecond)
	now := time.Unix(1000, 0)
	var slept []time.Duration
	l.now = func() time.Time { return now }
	l.sleep = func(d time.Duration) { slept = append(slept, d); now = now.Add(d) }
	entered, block := make(chan struct{}), make(chan struct{})
	h := l.limit(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-block
		w.WriteHeader(http.StatusOK)
	})
	call := func() int {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, "/api/order?id=1", nil))
		return rec.Code
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = call() }()
	<-entered
	if code := call(); code != http.StatusTooManyRequests {
		t.Fatalf("second lookup while one runs past the wait: %d", code)
	}
	close(block)
	wg.Wait()

	// The next lookup, 300 ms after the first started, waits out the gap.
	now = now.Add(300 * time.Millisecond)
	go func() { <-entered }()
	if code := call(); code != http.StatusOK || len(slept) != 1 || slept[0] != 700*time.Millisecond {
		t.Fatalf("lookup within the gap: %d, slept %v; want 200 after 700ms", code, slept)
	}
	// One that waits for a running lookup gets its turn once it ends.
	block2 := make(chan struct{})
	l.maxWait = 5 * time.Second
	h2 := l.limit(func(w http.ResponseWriter, _ *http.Request) { <-block2; w.WriteHeader(http.StatusOK) })
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			rec := httptest.NewRecorder()
			h2(rec, httptest.NewRequest(http.MethodGet, "/api/order?id=1", nil))
			codes <- rec.Code
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(block2)
	if a, b := <-codes, <-codes; a != http.StatusOK || b != http.StatusOK {
		t.Fatalf("queued lookups: %d, %d", a, b)
	}
}

// TestSignalsAreSharedBetweenPages: however many pages poll, the signals
// are read once per TTL.
func TestSignalsAreSharedBetweenPages(t *testing.T) {
	var reads atomic.Int32
	s := newSharedSignals(time.Second, func(context.Context) Signals {
		reads.Add(1)
		time.Sleep(10 * time.Millisecond)
		return Signals{SlotActive: true}
	})
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if !s.get(context.Background()).SlotActive {
				t.Error("a page got no signals")
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("20 pages at once: %d reads, want 1", n)
	}
	mu.Lock()
	now = now.Add(1500 * time.Millisecond)
	mu.Unlock()
	s.get(context.Background())
	if n := reads.Load(); n != 2 {
		t.Fatalf("after the TTL: %d reads, want 2", n)
	}
}

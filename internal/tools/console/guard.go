package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventforge/eventforge/internal/shared/secret"
)

// hostPolicy is the set of host names the console answers to. A page of
// another site that rebinds its own name to the console's address sends its
// own name as Host: refusing unknown names is what stops it.
type hostPolicy struct {
	names map[string]bool
}

// newHostPolicy allows localhost, the loopback addresses, the host of the
// bind address and extra; when bound to every interface (0.0.0.0, ::) also
// the machine's own addresses and host name.
func newHostPolicy(bindAddr string, extra []string) hostPolicy {
	p := hostPolicy{names: map[string]bool{"localhost": true}}
	host := hostOnly(bindAddr)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		p.addMachine()
	} else {
		p.names[host] = true
	}
	for _, h := range extra {
		if h = hostOnly(strings.TrimSpace(h)); h != "" {
			p.names[h] = true
		}
	}
	return p
}

func (p hostPolicy) addMachine() {
	if h, err := os.Hostname(); err == nil {
		p.names[strings.ToLower(h)] = true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			p.names[n.IP.String()] = true
		}
	}
}

// allows reports whether a request's Host (host or host:port) names the console.
func (p hostPolicy) allows(hostHeader string) bool {
	h := hostOnly(hostHeader)
	if h == "" {
		return false
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback() || p.names[ip.String()]
	}
	return p.names[h]
}

// hostOnly is the lower-case host of host, host:port or [v6]:port, without
// a final dot.
func hostOnly(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ".")
	return strings.ToLower(s)
}

// guardHost answers 421 Misdirected Request, before any handler runs, to a
// request whose Host is not one of the console's names.
func guardHost(p hostPolicy, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allows(r.Host) {
			http.Error(w, "unknown host "+strconv.Quote(r.Host)+": the console answers only its own names (add more with --allowed-hosts)", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sessionCookie carries, for a browser, proof that it was given the token:
// a digest of the token, never the token itself.
const sessionCookie = "eventforge_console"

// guardToken lets a request through when it carries the token: as
// "Authorization: Bearer", as the session cookie, or as ?token= (a browser's
// first visit: the answer sets the cookie and redirects to the same URL
// without the token). Others get 401. No token configured: all pass.
func guardToken(tok secret.Token, h http.Handler) http.Handler {
	if tok == "" {
		return h
	}
	sum := sha256.Sum256([]byte("eventforge-console-session:" + string(tok)))
	session := hex.EncodeToString(sum[:])
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got, ok := secret.BearerToken(r.Header); ok && tok.Matches(got) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(sessionCookie); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(session)) == 1 {
			h.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		if got := q.Get("token"); r.Method == http.MethodGet && got != "" && tok.Matches(got) {
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="eventforge-console"`)
		http.Error(w, "the console needs its token: open /?token=… once in the browser, or send Authorization: Bearer …", http.StatusUnauthorized)
	})
}

// lookupLimiter bounds the Kafka reads that order lookups cause: one lookup
// at a time, and starts at least gap apart. A lookup waits its turn for at
// most maxWait (the page's own polling and a reader's request may meet),
// then gets 429: a flood of requests never runs scans in parallel.
type lookupLimiter struct {
	gap, maxWait time.Duration
	slot         chan struct{}

	mu    sync.Mutex
	last  time.Time
	now   func() time.Time
	sleep func(time.Duration)
}

func newLookupLimiter(gap, maxWait time.Duration) *lookupLimiter {
	return &lookupLimiter{gap: gap, maxWait: maxWait, slot: make(chan struct{}, 1), now: time.Now, sleep: time.Sleep}
}

// acquire waits for the lookup slot and the gap since the last start;
// release gives the slot back. ok false: no turn within maxWait or ctx.
func (l *lookupLimiter) acquire(ctx context.Context) (release func(), ok bool) {
	timer := time.NewTimer(l.maxWait)
	defer timer.Stop()
	select {
	case l.slot <- struct{}{}:
	case <-timer.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
	l.mu.Lock()
	if wait := l.gap - l.now().Sub(l.last); !l.last.IsZero() && wait > 0 {
		l.sleep(wait) // the slot is held: the gap holds every other lookup too
	}
	l.last = l.now()
	l.mu.Unlock()
	return func() { <-l.slot }, true
}

// limit wraps a handler that reads Kafka.
func (l *lookupLimiter) limit(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		release, ok := l.acquire(r.Context())
		if !ok {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many order lookups at once; try again in a second"})
			return
		}
		defer release()
		h(w, r)
	}
}

// signalsReadTimeout bounds one read of the live signals.
const signalsReadTimeout = 5 * time.Second

// sharedSignals serves the live signals to every page from one read per
// ttl: each read asks PostgreSQL, Kafka and the processes' metrics, and the
// number of open pages (each polling every second) must not multiply that.
type sharedSignals struct {
	ttl  time.Duration
	read func(context.Context) Signals
	now  func() time.Time

	mu   sync.Mutex // held during a read: concurrent callers wait for it
	at   time.Time
	last Signals
}

func newSharedSignals(ttl time.Duration, read func(context.Context) Signals) *sharedSignals {
	return &sharedSignals{ttl: ttl, read: read, now: time.Now}
}

// get returns the last read when younger than ttl, else reads anew.
func (s *sharedSignals) get(ctx context.Context) Signals {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && s.now().Sub(s.at) < s.ttl {
		return s.last
	}
	// The read serves every page: one page going away must not cut it short.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), signalsReadTimeout)
	defer cancel()
	s.last, s.at = s.read(rctx), s.now()
	return s.last
}

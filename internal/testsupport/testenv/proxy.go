package testenv

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target and can freeze them: while
// frozen nothing is forwarded in either direction and nothing is closed,
// as on a network that silently drops every packet (a half-open
// connection). Thawing delivers what was held, closes included.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// StartProxy listens on a loopback port and forwards to target until the
// test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return StartProxyAt(t, "127.0.0.1:0", target)
}

// StartProxyAt is StartProxy listening on addr: a test can keep an address
// refused and then make a service appear there.
func StartProxyAt(t testing.TB, addr, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Via returns the URL u (postgres://…) with its host:port replaced by the
// proxy's.
func (p *Proxy) Via(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.Addr()
	return pu.String()
}

// Freeze stops forwarding, without closing anything.
func (p *Proxy) Freeze() { p.set(true) }

// Thaw resumes forwarding.
func (p *Proxy) Thaw() { p.set(false) }

func (p *Proxy) set(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.mu.Unlock()
	p.cond.Broadcast()
}

// gate blocks while the proxy is frozen.
func (p *Proxy) gate() {
	p.mu.Lock()
	for p.frozen {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// track registers a pair of connections, or closes them when the proxy is
// closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

// pipe copies src to dst through the gate; the end of src reaches dst
// through the gate too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.gate()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			_ = dst.Close()
			_ = src.Close()
			return
		}
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.frozen = false
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
}

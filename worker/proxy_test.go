package worker_test

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// tcpProxy forwards connections from a loopback port to a target, and can
// black-hole them: while it does, it accepts connections and reads nothing
// from either side, as a dropped route or a firewall that drops packets
// would (no reset, no refusal; only timeouts). Healing resumes the traffic.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	holed   bool
	healed  chan struct{} // closed when the black hole ends
	conns   map[net.Conn]bool
	closed  bool
	running sync.WaitGroup
}

// startProxy listens on addr ("127.0.0.1:0" for any port) and forwards to
// target until the test ends.
func startProxy(t testing.TB, addr, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, healed: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(p.healed)
	p.running.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// via returns the PostgreSQL URL u with its host replaced by the proxy's.
func (p *tcpProxy) via(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.addr()
	return pu.String()
}

// blackhole stops all traffic until heal.
func (p *tcpProxy) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		p.healed = make(chan struct{})
	}
}

func (p *tcpProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holed {
		p.holed = false
		close(p.healed)
	}
}

// gate returns a channel closed when traffic may flow.
func (p *tcpProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healed
}

func (p *tcpProxy) accept() {
	defer p.running.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.running.Add(1)
		go p.serve(c)
	}
}

func (p *tcpProxy) serve(client net.Conn) {
	defer p.running.Done()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	<-p.gate()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
}

// pipe copies from src to dst, holding each chunk while the proxy is
// black-holed.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		<-p.gate()
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: close both ways
			return
		}
	}
}

func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// close stops listening, drops every connection and waits for the
// goroutines.
func (p *tcpProxy) close() {
	p.heal()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.running.Wait()
}

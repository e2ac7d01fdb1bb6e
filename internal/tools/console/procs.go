package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
)

// proc is one eventforge subprocess of the demo: the same binary as the
// console, started with its own flags and, for a failure scenario, its own
// failpoints. Its output goes to a log file per start.
type proc struct {
	name      string
	bin       string
	args      []string
	logDir    string
	readyAddr string // host:port serving /readyz; empty: none
	// env holds the process's secrets as KEY=VALUE (EVENTFORGE_PG_URL):
	// arguments are readable by every local user in /proc/PID/cmdline, the
	// environment only by the same user and root.
	env []string

	mu        sync.Mutex
	cmd       *exec.Cmd
	failpoint string
	starts    int
	exited    chan struct{}
	exitErr   error
	logPath   string
}

// procStatus is what the page shows of a process.
type procStatus struct {
	Name      string `json:"name"`
	Running   bool   `json:"running"`
	PID       int    `json:"pid,omitempty"`
	Failpoint string `json:"failpoint,omitempty"`
	Starts    int    `json:"starts"`
	LastExit  string `json:"last_exit,omitempty"`
}

// start runs the process with failpoints (empty: none). It does not wait
// for readiness: see waitReady.
func (p *proc) start(failpoints string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("start %s: already running", p.name)
	}
	p.starts++
	p.logPath = filepath.Join(p.logDir, fmt.Sprintf("%s.%02d.log", p.name, p.starts))
	f, err := os.Create(p.logPath)
	if err != nil {
		return fmt.Errorf("create log of %s: %w", p.name, err)
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = childEnv(failpoints, p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// The demo processes must not outlive the console, even after a SIGKILL of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.failpoint, p.exited, p.exitErr = cmd, failpoints, make(chan struct{}), nil
	exited := p.exited
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.cmd, p.exitErr = nil, err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// childEnv is the console's environment without EVENTFORGE_ variables (flags
// configure each process), plus the failpoints when given and the process's
// own variables (its secrets).
func childEnv(failpoints string, own ...string) []string {
	out := childproc.Env()
	if failpoints != "" {
		out = append(out, "EVENTFORGE_FAILPOINTS="+failpoints)
	}
	return append(out, own...)
}

// running reports whether the process runs.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// done is closed when the current run of the process exits (nil when none runs).
func (p *proc) done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.exited
}

func (p *proc) status() procStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := procStatus{Name: p.name, Running: p.cmd != nil, Failpoint: p.failpoint, Starts: p.starts}
	if p.cmd != nil {
		s.PID = p.cmd.Process.Pid
	} else if p.exitErr != nil {
		s.LastExit = p.exitErr.Error()
	}
	return s
}

// stop sends SIGTERM and waits for the exit, SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// waitExit waits until the process exits or ctx ends.
func (p *proc) waitExit(ctx context.Context) error {
	d := p.done()
	if d == nil {
		return nil
	}
	select {
	case <-d:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s to exit: %w", p.name, ctx.Err())
	}
}

// waitReady polls /readyz until it answers 200, the process exits or ctx ends.
func (p *proc) waitReady(ctx context.Context) error {
	if p.readyAddr == "" {
		return nil
	}
	client := &http.Client{Timeout: time.Second}
	for {
		d := p.done()
		if d == nil {
			return fmt.Errorf("%s exited before it was ready: %s", p.name, p.tail())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.readyAddr+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be ready: %w", p.name, ctx.Err())
		case <-d:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail is the end of the current log, for error messages.
func (p *proc) tail() string {
	p.mu.Lock()
	path := p.logPath
	p.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// logContains reports whether the current log holds s (the failpoint line).
func (p *proc) logContains(s string) bool {
	p.mu.Lock()
	path := p.logPath
	p.mu.Unlock()
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// errNotDemo is returned by the actions only demo mode offers.
var errNotDemo = errors.New("scenarios need demo mode: start the console with --demo")

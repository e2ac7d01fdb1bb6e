package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
)

// member is one eventforge subprocess that is restarted whenever it exits,
// until the run stops it. Its output goes to a log file per start.
type member struct {
	name string
	bin  string
	args []string
	dir  string // log directory
	log  *slog.Logger

	mu         sync.Mutex
	cmd        *exec.Cmd
	starts     int
	killed     bool // the last exit was our SIGKILL
	unexpected int  // exits not caused by us
	stopping   bool
	done       chan struct{}
}

// run keeps the member running until ctx ends.
func (m *member) run(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		cmd, err := m.start()
		if err != nil {
			m.log.Error("start failed", "member", m.name, "err", err)
		} else {
			err = cmd.Wait()
			m.mu.Lock()
			if !m.killed && !m.stopping {
				m.unexpected++
				m.log.Warn("exited by itself", "member", m.name, "err", err)
			}
			m.killed = false
			m.cmd = nil
			m.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (m *member) start() (*exec.Cmd, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return nil, fmt.Errorf("stopping")
	}
	m.starts++
	f, err := os.Create(filepath.Join(m.dir, fmt.Sprintf("%s.%03d.log", m.name, m.starts)))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Env = childproc.Env()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	f.Close() // the child holds its own descriptor
	m.cmd = cmd
	return cmd, nil
}

// kill sends SIGKILL to the running process; false when none runs.
func (m *member) kill() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return false
	}
	m.killed = true
	return m.cmd.Process.Signal(syscall.SIGKILL) == nil
}

// stop sends SIGTERM and waits for run to return (SIGKILL after 30s).
func (m *member) stop(cancel context.CancelFunc) {
	m.mu.Lock()
	m.stopping = true
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	}
	m.mu.Unlock()
	cancel()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.kill()
		<-m.done
	}
}

func execOut(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childproc.Env()
	return cmd.CombinedOutput()
}

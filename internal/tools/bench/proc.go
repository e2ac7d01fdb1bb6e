package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat; it
// is 100 on every Linux platform Go supports.
const clockTicks = 100

// proc is an eventforge subprocess (relay or worker) with its metrics port.
type proc struct {
	name    string
	cmd     *exec.Cmd
	addr    string // host:port of /metrics, /readyz (and /debug/pprof when served)
	logPath string
	started time.Time
	done    chan struct{}
	err     error
}

// startProc runs bin with args plus --metrics-addr on a free port, with its
// output in logDir/<name>.log and no EVENTFORGE_ variables in its
// environment, so only the flags given configure it.
func startProc(bin, name, logDir string, args ...string) (*proc, error) {
	addr, err := childproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log of %s: %w", name, err)
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, append(args, "--metrics-addr", addr)...)
	cmd.Env = childproc.Env()
	cmd.Stdout, cmd.Stderr = f, f
	p := &proc{name: name, cmd: cmd, addr: addr, logPath: logPath, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.started = time.Now()
	go func() {
		defer close(p.done)
		p.err = cmd.Wait()
	}()
	return p, nil
}

// exitedErr is non-nil once the process has exited: its status and log tail.
func (p *proc) exitedErr() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v): %s", p.name, p.err, p.logTail())
	default:
		return nil
	}
}

// logTail is the last lines of the process's output, for error messages.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " | ")
}

// stop sends SIGTERM and waits up to timeout, then SIGKILL. A clean exit
// returns nil.
func (p *proc) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.exitedErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %w (log %s)", p.name, p.err, p.logPath)
		}
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, timeout)
	}
}

// usage is a process's resource use so far.
type usage struct {
	CPUSeconds float64 // utime + stime
	PeakRSS    int64   // VmHWM, bytes
}

// readUsage reads /proc/<pid>/stat and /proc/<pid>/status.
func readUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, fmt.Errorf("read cpu time: %w", err)
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return usage{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, fmt.Errorf("read peak RSS: %w", err)
	}
	hwm, err := parseStatusKB(string(status), "VmHWM")
	if err != nil {
		return usage{}, err
	}
	return usage{CPUSeconds: cpu, PeakRSS: hwm << 10}, nil
}

// parseStatCPU returns utime+stime in seconds from a /proc/<pid>/stat line.
// The command name (field 2) may hold spaces, so fields count from its ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("parse /proc stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("parse /proc stat: too few fields")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse /proc stat: %w", err)
	}
	return float64(ut+st) / clockTicks, nil
}

// parseStatusKB reads a "Key:   123 kB" line of /proc/<pid>/status.
func parseStatusKB(status, key string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", key)
}

// resetPeak sets VmHWM back to the current RSS (clear_refs 5), so the next
// reading is the peak of the next stage only. Best effort.
func resetPeak(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

func (p *proc) usage() (usage, error) { return readUsage(p.cmd.Process.Pid) }

// childCPU is the user + system CPU seconds of an exited child (its rusage).
func childCPU(st *os.ProcessState) float64 {
	if st == nil {
		return 0
	}
	return (st.UserTime() + st.SystemTime()).Seconds()
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// get fetches path from the process's metrics address.
func (p *proc) get(ctx context.Context, path string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// metrics returns the process's /metrics body.
func (p *proc) metrics(ctx context.Context) ([]byte, error) {
	b, code, err := p.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", p.name, err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", p.name, code)
	}
	return b, nil
}

// histogram scrapes one histogram of the process.
func (p *proc) histogram(ctx context.Context, name string) (Histogram, error) {
	b, err := p.metrics(ctx)
	if err != nil {
		return Histogram{}, err
	}
	return ParseHistogram(bytes.NewReader(b), name)
}

// waitReady polls /readyz until it answers 200.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, 50*time.Millisecond, p.name+" ready", func() (bool, error) {
		if err := p.exitedErr(); err != nil {
			return false, err
		}
		_, code, err := p.get(ctx, "/readyz")
		return err == nil && code == http.StatusOK, nil
	})
}

// poll calls cond every interval until it holds, fails, or timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// pprofFlag is how a command offers profiling, read from its --help: a flag
// whose name starts with --pprof, boolean or taking an address.
type pprofFlag struct {
	name     string // e.g. --pprof or --pprof-addr
	takesArg bool
}

var pprofFlagRE = regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--pprof[\w-]*)(?: (\w+))?\s`)

// findPprofFlag reads `bin <sub...> --help` for a --pprof flag.
func findPprofFlag(ctx context.Context, bin string, sub ...string) (pprofFlag, bool) {
	out, err := exec.CommandContext(ctx, bin, append(sub, "--help")...).Output()
	if err != nil {
		return pprofFlag{}, false
	}
	return parsePprofFlag(string(out))
}

func parsePprofFlag(help string) (pprofFlag, bool) {
	m := pprofFlagRE.FindStringSubmatch(help)
	if m == nil {
		return pprofFlag{}, false
	}
	return pprofFlag{name: m[1], takesArg: m[2] != "" && m[2] != "bool"}, true
}

// args are the flags that turn profiling on; an address flag gets a free
// port, returned as the place to fetch profiles from.
func (f pprofFlag) args() ([]string, string, error) {
	if !f.takesArg {
		return []string{f.name}, "", nil
	}
	addr, err := childproc.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	return []string{f.name, addr}, addr, nil
}

// cpuProfile fetches a CPU profile of seconds from addr (the metrics address
// when empty) into path. A process that serves no /debug/pprof gives an error
// the caller reports as "no profile", never a failure of the bench.
func (p *proc) cpuProfile(ctx context.Context, addr string, seconds int, path string) error {
	if addr == "" {
		addr = p.addr
	}
	client := &http.Client{Timeout: time.Duration(seconds+30) * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch profile of %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch profile of %s: HTTP %d", p.name, resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("fetch profile of %s: %w", p.name, err)
	}
	return os.WriteFile(path, b, 0o644)
}

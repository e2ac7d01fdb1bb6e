package console

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// TestDemoChildrenGetThePasswordOutsideTheirArguments starts the demo's
// processes (a stand-in script that keeps its arguments and sleeps) and reads what every local user
// can read of them, /proc/PID/cmdline: the PostgreSQL password must not be
// there, and the URL must reach the child through its environment.
func TestDemoChildrenGetThePasswordOutsideTheirArguments(t *testing.T) {
	const password = "pw-Zq81-never-in-argv"
	dir := t.TempDir()
	bin := filepath.Join(dir, "eventforge")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nsleep 10\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &demo{cfg: Config{Bin: bin, Kafka: kafka.Config{Brokers: []string{"127.0.0.1:9"}}},
		dbURL: "postgres://alice:" + password + "@127.0.0.1:5432/console_x", slot: "s", prefix: "p.", group: "g", dir: dir}
	if err := d.makeProcs(); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.procs() {
		if err := p.start(""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.stop(5 * time.Second) })
		pid := p.status().PID
		// Read once the exec is complete: the script's arguments are there.
		cmdline := readProcFile(t, pid, "cmdline", p.args[0])
		if strings.Contains(cmdline, password) || strings.Contains(cmdline, "--pg-url") {
			t.Errorf("%s: the password is on the command line: %q", p.name, cmdline)
		}
		if env := readProcFile(t, pid, "environ", "PATH="); !strings.Contains(env, "EVENTFORGE_PG_URL=postgres://alice:"+password+"@") {
			t.Errorf("%s: EVENTFORGE_PG_URL with the password not in the environment", p.name)
		}
	}
}

// readProcFile reads /proc/PID/name once it contains want (or after 2 s).
func readProcFile(t *testing.T, pid int, name, want string) string {
	t.Helper()
	var s string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
		if err != nil {
			t.Fatal(err)
		}
		if s = strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(s, want) {
			break
		}
	}
	return s
}

package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// describeMachine collects what a reader needs to compare runs. Every part is
// best effort: an unknown value says so rather than failing the bench.
func describeMachine(ctx context.Context, pgURL, version string) Machine {
	m := Machine{NumCPU: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version(), Binary: version}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if s := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindStringSubmatch(string(b)); s != nil {
			m.CPUModel = strings.TrimSpace(s[1])
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := parseStatusKB(string(b), "MemTotal"); err == nil {
			m.MemoryMB = kb >> 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.PostgreSQL, m.PGSettings = postgresInfo(ctx, pgURL)
	m.Kafka = kafkaVersion()
	m.Git = gitDescribe(ctx)
	return m
}

// loadAverage is the machine's 1-minute load average (0 when unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func postgresInfo(ctx context.Context, url string) (string, map[string]string) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "unknown", nil
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		version = "unknown"
	}
	settings := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY($1)`,
		[]string{"fsync", "synchronous_commit", "shared_buffers", "wal_level", "max_wal_size", "wal_sender_timeout", "full_page_writes"})
	if err == nil {
		for rows.Next() {
			var k, v string
			if rows.Scan(&k, &v) == nil {
				settings[k] = v
			}
		}
		rows.Close()
	}
	return version, settings
}

var kafkaJarRE = regexp.MustCompile(`kafka-server-([0-9][\w.-]*)\.jar$|kafka_[0-9.]+-([0-9][\w.-]*)\.jar$`)

// kafkaVersion finds a local broker (a java process running kafka.Kafka) and
// reads the version from the jars on its class path. The Kafka protocol does
// not tell a client the broker's release.
func kafkaVersion() string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "kafka.Kafka") {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if (a != "-cp" && a != "-classpath") || i+1 >= len(args) {
				continue
			}
			for _, entry := range strings.Split(args[i+1], ":") {
				jars, _ := filepath.Glob(entry)
				for _, j := range jars {
					if s := kafkaJarRE.FindStringSubmatch(filepath.Base(j)); s != nil {
						return s[1] + s[2]
					}
				}
			}
		}
	}
	return "unknown (no local kafka.Kafka process found)"
}

func gitDescribe(ctx context.Context) string {
	if out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			return rev[:min(12, len(rev))] + dirty
		}
	}
	return "unknown"
}

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// TestLocalServicesUpTwiceThenDown runs the scripts behind make up / make down
// on a state folder of its own: up twice (the second reuses), both services
// answer real clients, and down leaves no process behind.
func TestLocalServicesUpTwiceThenDown(t *testing.T) {
	t.Parallel()
	Shared(t)
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(stateDir(root), "private", "local-test-"+UniqueName("s")[2:])
	// The scripts' state folder, not the process's; the shared caches.
	env := append(sharedCaches(root), "EVENTFORGE_STATE_DIR="+state)
	t.Cleanup(func() {
		_, _ = runScriptEnv(root, env, "down.sh")
		removeAll(filepath.Join(state, "pg"))
		_ = os.RemoveAll(state)
	})

	for i := 0; i < 2; i++ {
		if out, err := runScriptEnv(root, env, "up.sh"); err != nil {
			t.Fatalf("up.sh run %d: %v\n%s", i+1, err, out)
		}
	}
	vars, err := readEnvFile(filepath.Join(state, "local.env"))
	if err != nil {
		t.Fatalf("read local.env: %v", err)
	}
	if !strings.HasPrefix(vars["EVENTFORGE_PG_URL"], "postgres://") {
		t.Fatalf("EVENTFORGE_PG_URL = %q", vars["EVENTFORGE_PG_URL"])
	}
	brokers := kafka.ParseBrokers(vars["EVENTFORGE_KAFKA_BROKERS"])
	if len(brokers) != 1 {
		t.Fatalf("EVENTFORGE_KAFKA_BROKERS = %q", vars["EVENTFORGE_KAFKA_BROKERS"])
	}
	assertPostgresAnswers(t, vars["EVENTFORGE_PG_URL"])
	assertSaramaMetadata(t, brokers)
	assertKcatMetadata(t, brokers[0])

	if out, err := runScriptEnv(root, env, "down.sh"); err != nil {
		t.Fatalf("down.sh: %v\n%s", err, out)
	}
	if left := processesMentioning(t, state); len(left) > 0 {
		t.Fatalf("processes left after down: %v", left)
	}
	if _, err := os.Stat(filepath.Join(state, "local.env")); !os.IsNotExist(err) {
		t.Errorf("local.env still there after down (err=%v)", err)
	}
}

func assertPostgresAnswers(t *testing.T, url string) {
	t.Helper()
	conn := connect(t, url)
	var walLevel string
	if err := conn.QueryRow(t.Context(), "SHOW wal_level").Scan(&walLevel); err != nil {
		t.Fatalf("query PostgreSQL: %v", err)
	}
	if walLevel != "logical" {
		t.Fatalf("wal_level = %q, want logical", walLevel)
	}
}

func assertSaramaMetadata(t *testing.T, brokers []string) {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.Config{Brokers: brokers}.Base())
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer client.Close()
	if got := len(client.Brokers()); got != 1 {
		t.Fatalf("sarama sees %d brokers, want 1", got)
	}
	if _, err := client.Controller(); err != nil {
		t.Fatalf("sarama metadata: no controller: %v", err)
	}
}

func assertKcatMetadata(t *testing.T, broker string) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not installed (apt-get install kcat): %v", err)
	}
	out, err := exec.Command(kcat, "-b", broker, "-L", "-m", "10").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 brokers") {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
}

// processesMentioning lists the command lines of processes naming dir.
func processesMentioning(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, dir) {
			found = append(found, e.Name()+": "+cmdline)
		}
	}
	return found
}

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/eventforge/eventforge/internal/kafka"
)

// services are the run's private PostgreSQL cluster and Kafka broker,
// started by deploy/local/up.sh under their own state directory so the
// shared local services are never touched.
type services struct {
	root, dir string
	pgURL     string // the cluster's "eventforge" database
	brokers   []string
}

func (s *services) script(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "deploy", "local", name), args...)
	cmd.Env = append(os.Environ(), "EVENTFORGE_STATE_DIR="+s.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func startServices(ctx context.Context, root, dir string) (*services, error) {
	s := &services{root: root, dir: dir}
	if err := s.script(ctx, "up.sh"); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, "local.env"))
	if err != nil {
		return nil, fmt.Errorf("read local.env: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "EVENTFORGE_PG_URL":
			s.pgURL = v
		case "EVENTFORGE_KAFKA_BROKERS":
			s.brokers = kafka.ParseBrokers(v)
		}
	}
	if s.pgURL == "" || len(s.brokers) == 0 {
		return nil, fmt.Errorf("local.env in %s lacks a URL or brokers", dir)
	}
	return s, nil
}

// restartPG crashes the cluster (immediate shutdown: WAL recovery on start,
// slots back to their last checkpointed position) and starts it again.
func (s *services) restartPG(ctx context.Context) error {
	return s.script(ctx, "pg.sh", "restart", filepath.Join(s.dir, "pg"), "immediate")
}

// restartKafka stops the broker, in order or with SIGKILL, and starts it
// again on the same port.
func (s *services) restartKafka(ctx context.Context, hard bool) error {
	dir := filepath.Join(s.dir, "kafka")
	stop := "stop"
	if hard {
		stop = "kill"
	}
	if err := s.script(ctx, "kafka.sh", stop, dir); err != nil {
		return err
	}
	return s.script(ctx, "kafka.sh", "start", dir)
}

// down stops both services, whatever ctx says.
func (s *services) down() error {
	return s.script(context.Background(), "down.sh")
}

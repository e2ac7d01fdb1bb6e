package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// services are the run's private PostgreSQL and Kafka, started by
// deploy/local/up.sh under their own state directory so the shared local
// services are never touched: one PostgreSQL server, or a primary and a
// synchronous standby that trade places on each promotion, and one broker
// or a cluster of kafkaNodes.
type services struct {
	root, dir  string
	env        []string // the scripts' extra environment
	pgURL      string   // the first primary's "eventforge" database
	brokers    []string
	kafkaNodes int

	primary, standby string // PostgreSQL cluster folders; standby "" without one
}

func (s *services) script(ctx context.Context, name string, args ...string) error {
	_, err := s.scriptOut(ctx, name, args...)
	return err
}

func (s *services) scriptOut(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "deploy", "local", name), args...)
	cmd.Env = append(append(os.Environ(), s.env...), "EVENTFORGE_STATE_DIR="+s.dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, bytes.TrimSpace(append(out.Bytes(), errOut.Bytes()...)))
	}
	return strings.TrimSpace(out.String()), nil
}

// startServices starts PostgreSQL (pgVersion: "" for the machine's; with
// standby, a streaming standby too) and Kafka (kafkaNodes brokers).
func startServices(ctx context.Context, root, dir, pgVersion string, standby bool, kafkaNodes int) (*services, error) {
	s := &services{root: root, dir: dir, kafkaNodes: kafkaNodes, primary: filepath.Join(dir, "pg")}
	if pgVersion != "" {
		s.primary += "-" + pgVersion
	}
	s.env = []string{"EVENTFORGE_PG_VERSION=" + pgVersion, "EVENTFORGE_KAFKA_NODES=" + strconv.Itoa(kafkaNodes), "EVENTFORGE_STANDBY="}
	if standby {
		s.env[2] += "1"
		s.standby = s.primary + ".standby"
		// An earlier run's promotions swapped the two servers' roles:
		// start from a new primary and standby.
		if err := s.removePG(); err != nil {
			return nil, err
		}
	}
	if err := s.script(ctx, "up.sh"); err != nil {
		return nil, err
	}
	env, err := readEnv(filepath.Join(dir, "local.env"))
	if err != nil {
		return nil, err
	}
	s.pgURL, s.brokers = env["EVENTFORGE_PG_URL"], kafka.ParseBrokers(env["EVENTFORGE_KAFKA_BROKERS"])
	if s.pgURL == "" || len(s.brokers) == 0 || (standby && env["EVENTFORGE_STANDBY_URL"] == "") {
		return nil, fmt.Errorf("local.env in %s lacks a URL or brokers", dir)
	}
	return s, nil
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read local.env: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		env[k] = v
	}
	return env, sc.Err()
}

// removePG stops whatever runs in the state directory and removes both
// PostgreSQL clusters.
func (s *services) removePG() error {
	if err := s.down(); err != nil {
		return err
	}
	for _, dir := range []string{s.primary, s.standby} {
		if err := removeCluster(dir); err != nil {
			return err
		}
	}
	return nil
}

// removeCluster removes the PostgreSQL cluster folder dir and its data,
// which may live elsewhere (pg.sh links it from /var/tmp when the cluster's
// OS user cannot reach dir).
func removeCluster(dir string) error {
	if data, err := filepath.EvalSymlinks(filepath.Join(dir, "data")); err == nil {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// restartPG crashes the primary (immediate shutdown: WAL recovery on start,
// slots back to their last checkpointed position) and starts it again.
func (s *services) restartPG(ctx context.Context) error {
	return s.script(ctx, "pg.sh", "restart", s.primary, "immediate")
}

// restartKafka stops a broker (the one node of id, or the single broker),
// in order or with SIGKILL, and starts it again on the same port.
func (s *services) restartKafka(ctx context.Context, id int, hard bool) error {
	stop := "stop"
	if hard {
		stop = "kill"
	}
	if err := s.script(ctx, "kafka.sh", stop, s.kafkaDir(id)); err != nil {
		return err
	}
	if s.kafkaNodes == 1 {
		return s.script(ctx, "kafka.sh", "start", s.kafkaDir(id))
	}
	return s.script(ctx, "kafka-cluster.sh", "start", filepath.Join(s.dir, "kafka-"+strconv.Itoa(s.kafkaNodes)))
}

// kafkaDir is the folder of broker id (1 … kafkaNodes).
func (s *services) kafkaDir(id int) string {
	if s.kafkaNodes == 1 {
		return filepath.Join(s.dir, "kafka")
	}
	return filepath.Join(s.dir, "kafka-"+strconv.Itoa(s.kafkaNodes), "node"+strconv.Itoa(id))
}

// kafkaPID is the process id of broker id.
func (s *services) kafkaPID(id int) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.kafkaDir(id), "kafka.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// down stops both services, whatever ctx says.
func (s *services) down() error {
	return s.script(context.Background(), "down.sh")
}

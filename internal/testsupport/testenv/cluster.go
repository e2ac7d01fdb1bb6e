package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// KafkaCluster is a private Kafka cluster of several nodes (each a broker
// and a controller) for tests that lose one: topics get as many replicas
// as there are nodes and min.insync.replicas one less.
type KafkaCluster struct {
	root, dir string
	nodes     int
	brokers   []string
}

// StartKafkaCluster starts a private cluster of nodes nodes (node ids 1 …
// nodes, as the brokers report them); it is killed and removed at cleanup.
func StartKafkaCluster(t testing.TB, nodes int) *KafkaCluster {
	t.Helper()
	Shared(t)
	root, dir := privateDir(t, "kafka")
	c := &KafkaCluster{root: root, dir: dir, nodes: nodes}
	t.Cleanup(func() {
		for id := 1; id <= nodes; id++ {
			_ = c.signal(id, syscall.SIGCONT)
		}
		_, _ = runScript(root, "kafka-cluster.sh", "kill", dir)
		for id := 1; id <= nodes; id++ {
			removeAll(c.nodeDir(id))
		}
		removeAll(dir)
	})
	out, err := runScript(root, "kafka-cluster.sh", "start", dir, strconv.Itoa(nodes))
	if err != nil {
		// The free ports the script picked may have been taken by a test
		// running beside this one before the brokers bound them: start
		// once more on new ones.
		t.Logf("kafka-cluster.sh start: %v; starting once more\n%s", err, out)
		_, _ = runScript(root, "kafka-cluster.sh", "kill", dir)
		for id := 1; id <= nodes; id++ {
			removeAll(c.nodeDir(id))
		}
		removeAll(filepath.Join(dir, "cluster.env")) // its ports: pick new ones
		out, err = runScript(root, "kafka-cluster.sh", "start", dir, strconv.Itoa(nodes))
	}
	if err != nil {
		t.Fatalf("kafka-cluster.sh start: %v\n%s", err, out)
	}
	out, err = runScript(root, "kafka-cluster.sh", "brokers", dir)
	if err != nil {
		t.Fatalf("kafka-cluster.sh brokers: %v\n%s", err, out)
	}
	c.brokers = kafka.ParseBrokers(strings.TrimSpace(string(out)))
	return c
}

// Brokers is every broker's host:port.
func (c *KafkaCluster) Brokers() []string { return c.brokers }

// Freeze stops node id with SIGSTOP: its connections stay open and nothing
// answers on them, as with a paused VM or a network dropping packets.
func (c *KafkaCluster) Freeze(t testing.TB, id int) { c.mustSignal(t, id, syscall.SIGSTOP) }

// Thaw resumes a frozen node.
func (c *KafkaCluster) Thaw(t testing.TB, id int) { c.mustSignal(t, id, syscall.SIGCONT) }

// Kill ends node id with SIGKILL.
func (c *KafkaCluster) Kill(t testing.TB, id int) {
	t.Helper()
	out, err := runScript(c.root, "kafka.sh", "kill", c.nodeDir(id))
	if err != nil {
		t.Fatalf("kafka.sh kill node %d: %v\n%s", id, err, out)
	}
}

func (c *KafkaCluster) nodeDir(id int) string { return filepath.Join(c.dir, "node"+strconv.Itoa(id)) }

func (c *KafkaCluster) mustSignal(t testing.TB, id int, sig syscall.Signal) {
	t.Helper()
	if err := c.signal(id, sig); err != nil {
		t.Fatal(err)
	}
}

// signal sends sig to node id's broker process.
func (c *KafkaCluster) signal(id int, sig syscall.Signal) error {
	b, err := os.ReadFile(filepath.Join(c.nodeDir(id), "kafka.pid"))
	if err != nil {
		return fmt.Errorf("node %d: %w", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("node %d: pid %q: %w", id, b, err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("node %d (pid %d): %s: %w", id, pid, sig, err)
	}
	return nil
}

// BusiestLeader is the node id of the broker leading most partitions of
// topic: the one whose loss moves most.
func (c *KafkaCluster) BusiestLeader(t testing.TB, topic string) int {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(c.brokers, kafka.Config{Brokers: c.brokers}.Base())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	md, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(md) != 1 {
		t.Fatalf("describe %s: %v %v", topic, md, err)
	}
	led := map[int32]int{}
	best := int32(-1)
	for _, p := range md[0].Partitions {
		led[p.Leader]++
		if best < 0 || led[p.Leader] > led[best] {
			best = p.Leader
		}
	}
	return int(best)
}

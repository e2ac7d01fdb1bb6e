// Package chaos is EventForge's Jepsen-style run (docs/design.md#labelled-writes):
// private PostgreSQL and Kafka, a load generator that labels every write by
// its commit outcome, two relays on one slot, a worker group of three and a
// schedule of SIGKILLs, broker restarts and freezes, PostgreSQL immediate
// restarts and promotions of a standby.
// After the faults stop it quiesces and checks, from durable state only,
// that no committed event was lost, no rolled-back one appeared, every key's
// first occurrences are in commit order and every committed event took
// effect exactly once.
//
// Imports (floor: tool): shared libraries; it runs the product as
// subprocesses; never another tool.
package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"
)

// Config of one run. Start from DefaultConfig.
type Config struct {
	Bin      string        // the eventforge binary
	Root     string        // repository root: deploy/local scripts live there
	StateDir string        // private services, logs and the report
	Duration time.Duration // of the fault phase
	Quiesce  time.Duration // longest wait for everything to be applied afterwards
	Seed     uint64        // of the fault schedule and the load; 0 picks one
	Report   string        // JSON report path (default StateDir/report.json)
	Writers  int           // concurrent SQL writers, each with its own keys
	// NoBrokerRestarts leaves the brokers out of the fault schedule
	// (restarts and freezes): a short run on a busy machine would spend
	// itself in one JVM restart.
	NoBrokerRestarts bool
	// KafkaNodes is the number of brokers: 3 (a KRaft cluster, topics
	// replicated 3 times, min.insync.replicas 2) or 1.
	KafkaNodes int
	// Promotions runs PostgreSQL as a primary and a synchronous standby
	// with slot synchronisation and adds promotions to the schedule. It
	// needs PostgreSQL 17 or later (failover slots).
	Promotions bool
	// PGVersion is the PostgreSQL major version ("16", "17", "18": from
	// Maven Central; "" the machine's, or 17 with Promotions).
	PGVersion string
	// ExactlyOnce runs the relays with --exactly-once, reads the topic
	// with read_committed and counts every duplicate as a violation.
	ExactlyOnce bool
	Log         *slog.Logger
}

// DefaultConfig is a two-minute run on a 3-node Kafka cluster and a
// PostgreSQL 17 primary with a standby: every fault in the schedule.
func DefaultConfig() Config {
	return Config{Duration: 120 * time.Second, Quiesce: 4 * time.Minute, Writers: 3, KafkaNodes: 3, Promotions: true}
}

// failoverVersion is the PostgreSQL version promotions run on unless told.
const failoverVersion = "17"

// resolved is c validated, with the seed, the report path and the
// PostgreSQL version of promotions filled in.
func (c Config) resolved() (Config, error) {
	if c.Promotions && c.PGVersion == "" {
		c.PGVersion = failoverVersion
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Report == "" {
		c.Report = filepath.Join(c.StateDir, "report.json")
	}
	return c, nil
}

// major is a PostgreSQL major version as a number; 0 for "" (the
// machine's, 15) or anything else.
func major(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.KafkaNodes != 1 && c.KafkaNodes != 3:
		return errors.New("--kafka-nodes is 1 or 3")
	case c.Promotions && major(c.PGVersion) < major(failoverVersion):
		return fmt.Errorf("promotions need PostgreSQL %s or later (failover slots), not %s: --promotions=false", failoverVersion, c.PGVersion)
	case c.Bin == "":
		return errors.New("no eventforge binary (--bin)")
	case c.Root == "" || c.StateDir == "":
		return errors.New("no repository root or state directory")
	case c.Duration <= 0:
		return errors.New("--duration must be positive")
	case c.Quiesce <= 0:
		return errors.New("--quiesce must be positive")
	case c.Writers < 1:
		return errors.New("--writers must be at least 1")
	}
	return nil
}

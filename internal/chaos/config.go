// Package chaos is EventForge's Jepsen-style run (docs/design.md#labelled-writes):
// private PostgreSQL and Kafka, a load generator that labels every write by
// its commit outcome, two relays on one slot, a worker group of three and a
// schedule of SIGKILLs, broker restarts and PostgreSQL immediate restarts.
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
	"log/slog"
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
	// NoBrokerRestarts leaves the broker out of the fault schedule: a
	// short run on a busy machine would spend itself in one JVM restart.
	NoBrokerRestarts bool
	// ExactlyOnce runs the relays with --exactly-once, reads the topic
	// with read_committed and counts every duplicate as a violation.
	ExactlyOnce bool
	Log         *slog.Logger
}

// DefaultConfig is a two-minute run.
func DefaultConfig() Config {
	return Config{Duration: 120 * time.Second, Quiesce: 4 * time.Minute, Writers: 3}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
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

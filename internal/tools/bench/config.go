// Package bench measures EventForge on real services: how fast the
// relay drains a backlog compared with pg_recvlogical on the same WAL, its
// commit-to-ack latency and slot lag under an open-loop writer, and how fast
// the worker applies a pre-filled topic — each with the CPU time and peak RSS
// of the relay or worker subprocess. It prints a table and writes JSON.
//
// Imports (floor: tool): the product (cdc) and shared libraries; never
// another tool.
package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of the bench (the sizes the targets are set for, docs/bench.md).
const (
	DefaultEvents             = 1_000_000
	DefaultSteadyDuration     = 60 * time.Second
	DefaultRates              = "1000,5000,10000,5000/10,50000/100"
	DefaultWorkerEvents       = 1_000_000
	DefaultWorkerSingleEvents = 100_000
	DefaultWriters            = 32
	DefaultStatusInterval     = 100 * time.Millisecond
	DefaultJSONOut            = ".eventforge/bench/results.json"
	DefaultStages             = "drain,steady,worker"
	DefaultModes              = DeliveryAtLeastOnce + "," + DeliveryExactlyOnce
	DefaultShapes             = ShapeNameBulk + "," + ShapeNameSingle
	DefaultRepeat             = 1
)

// Delivery modes of the relay: the drain and steady stages run once per
// mode selected (--modes).
const (
	DeliveryAtLeastOnce = "at-least-once"
	DeliveryExactlyOnce = "exactly-once" // cdc run --exactly-once
)

// Shape and mode names in the results.
const (
	ShapeBulk   = "1000-row txns"
	ShapeSingle = "single-row txns"
	ModeBatch   = "batch"
	ModeSingle  = "one-by-one"
)

// Config is one bench run.
type Config struct {
	PGURL   string   // admin URL of the cluster; each measurement gets a fresh database on it
	Brokers []string // Kafka bootstrap brokers
	Binary  string   // the eventforge binary run as relay and worker

	Stages []string
	Modes  []string // delivery modes of the drain, steady and kafka stages
	// ValueSchema, when "avro", runs the drain stage a second time with
	// the relay writing Avro values in a schema registry's wire format
	// (cdc run --value-schema avro), against a registry the bench serves
	// on loopback: rows of that run carry ValueSchema.
	ValueSchema        string
	Shapes             []string      // drain shapes (ShapeNameBulk, ShapeNameSingle); empty: both
	Repeat             int           // drain runs per shape and mode, each on a fresh database, and steady rounds of every mode in turn; 0: DefaultRepeat
	Events             int           // drain backlog per shape
	SteadyDuration     time.Duration // per rate
	Rates              []Rate
	WorkerEvents       int // batch mode
	WorkerSingleEvents int // one by one
	Writers            int // connections of the steady-state writer
	StatusInterval     time.Duration
	RecvLogical        string // pg_recvlogical; empty: found on PATH or under /usr/lib/postgresql
	JSONOut            string
	PprofDir           string // CPU profiles of the relay and worker, when they serve /debug/pprof
	Command            string // the command line, for the report
	Version            string // of the binary, for the report

	Out io.Writer // the table
	Log *slog.Logger
}

// ParseStages reads a comma-separated subset of drain, steady, worker, kafka.
func ParseStages(s string) ([]string, error) {
	var out []string
	for _, st := range strings.Split(s, ",") {
		st = strings.TrimSpace(st)
		switch st {
		case "":
			continue
		case StageDrain, StageSteady, StageWorker, StageKafka:
			if !slices.Contains(out, st) {
				out = append(out, st)
			}
		default:
			return nil, fmt.Errorf("unknown stage %q: want drain, steady, worker or kafka", st)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no stages selected")
	}
	return out, nil
}

// ParseModes reads a comma-separated subset of at-least-once, exactly-once.
func ParseModes(s string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "":
			continue
		case DeliveryAtLeastOnce, DeliveryExactlyOnce:
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		default:
			return nil, fmt.Errorf("unknown mode %q: want at-least-once or exactly-once", m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no modes selected")
	}
	return out, nil
}

// Validate reports every problem of a configuration that cannot run
// (errors.Join) and fills the defaults of the fields left empty.
func (c *Config) Validate() error {
	if errs := c.problems(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.setDefaults()
	return nil
}

// problems lists every reason the configuration cannot run.
func (c *Config) problems() []error {
	var errs []error
	add := func(bad bool, msg string) {
		if bad {
			errs = append(errs, errors.New(msg))
		}
	}
	add(c.PGURL == "", "no PostgreSQL URL: set --pg-url or EVENTFORGE_PG_URL")
	add(c.ValueSchema != "" && c.ValueSchema != "avro", "--value-schema: the bench measures avro only")
	add(len(c.Brokers) == 0, "no Kafka brokers: set --kafka-brokers or EVENTFORGE_KAFKA_BROKERS")
	add(c.Binary == "", "no eventforge binary to run the relay and worker")
	add(c.Events <= 0 || c.WorkerEvents <= 0 || c.WorkerSingleEvents <= 0, "--events, --worker-events and --worker-single-events must be positive")
	add(c.SteadyDuration <= 0 || c.Writers <= 0 || c.StatusInterval <= 0, "--steady-duration, --writers and --relay-status-interval must be positive")
	add(c.Repeat < 0, "--repeat must be positive")
	add(len(c.Stages) == 0, "no stages selected")
	add(c.JSONOut == "", "--json-out must name a file")
	add((slices.Contains(c.Stages, StageSteady) || slices.Contains(c.Stages, StageKafka)) && len(c.Rates) == 0, "no --rates for the steady and kafka stages")
	for _, name := range c.Shapes {
		if _, err := shapeNamed(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// setDefaults fills the defaults of the fields left empty.
func (c *Config) setDefaults() {
	if len(c.Modes) == 0 {
		c.Modes = []string{DeliveryAtLeastOnce}
	}
	if len(c.Shapes) == 0 {
		c.Shapes = []string{ShapeNameBulk, ShapeNameSingle}
	}
	if c.Repeat == 0 {
		c.Repeat = DefaultRepeat
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// findRecvLogical returns pg_recvlogical: the configured one, the one next to
// pg_config's --bindir, on PATH, or the newest under /usr/lib/postgresql.
func findRecvLogical(configured string) (string, error) {
	if configured != "" {
		return exec.LookPath(configured)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "pg_recvlogical")
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pg_recvlogical"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_recvlogical")
	if len(found) == 0 {
		return "", errors.New("pg_recvlogical not found (install the PostgreSQL client binaries or set --pg-recvlogical)")
	}
	slices.Sort(found) // lexical; good enough for 13..19
	return found[len(found)-1], nil
}

// Package console serves `eventforge console`: a web page that explains one
// order's journey through the outbox relay, Kafka and an inbox worker, and
// shows the real state of the system at every step.
//
// Read-only, it looks at any running pipeline (PostgreSQL, Kafka, the
// relay's and the workers' metrics). In demo mode it starts its own API,
// relay and workers (subprocesses of the same binary) on a fresh database,
// slot, topic prefix and consumer group, and runs the journey and the
// failure scenarios for real through them, with the existing failpoints.
//
// Imports (floor: tool): shared libraries; it runs the product as
// subprocesses of the same binary; never another tool.
package console

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/secret"
)

// Config configures the console.
type Config struct {
	// HTTPAddr is where the page is served. Default 127.0.0.1:8088.
	HTTPAddr string
	// PGURL is the PostgreSQL database to read (demo mode: the cluster in
	// which a fresh database is created). Required.
	PGURL string
	// Kafka is how the console reaches the brokers (read-only mode: TLS and
	// SASL included; the demo's processes get only the broker list).
	// Brokers required.
	Kafka kafka.Config
	// Demo starts the console's own pipeline and offers the scenarios.
	Demo bool
	// Bin is the eventforge binary the demo starts (default: the running one).
	Bin string
	// StateDir holds the demo's logs and screenshots. Default .eventforge.
	StateDir string

	// Read-only mode: what to look at. Slot default "eventforge", Topic
	// default "orders", Group default "eventforge".
	Slot, Topic, Group, Consumer string
	// RelayMetrics and WorkerMetrics are host:port addresses serving
	// /metrics (empty: the signals they give are shown as unknown).
	// RelayMetrics may list several, comma-separated: the active relay and
	// its standbys, each drawn with its state.
	RelayMetrics  string
	WorkerMetrics []string
	// APIURL is the orders API (read-only mode: only shown).
	APIURL string

	// AllowedHosts are host names the console answers to besides its own
	// (the bind address, localhost, loopback addresses): the names a proxy
	// or a browser uses to reach it. Requests naming another host get 421.
	AllowedHosts []string
	// Token, when set, is required of every request: as
	// "Authorization: Bearer", or in a browser through ?token= once (the
	// answer sets a session cookie). Required when HTTPAddr is beyond
	// loopback, unless InsecureNoAuth.
	Token secret.Token
	// InsecureNoAuth lets the console bind beyond loopback without a token.
	InsecureNoAuth bool

	// Logger receives the console's own log lines. Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		HTTPAddr: "127.0.0.1:8088",
		StateDir: ".eventforge",
		Slot:     "eventforge",
		Topic:    "orders",
		Group:    "eventforge",
	}
}

// Validate reports every configuration error at once.
func (c Config) Validate() error {
	var errs []error
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("no --http-addr"))
	}
	if c.PGURL == "" {
		errs = append(errs, errors.New("no PostgreSQL URL: set --pg-url or EVENTFORGE_PG_URL"))
	}
	if len(c.Kafka.Brokers) == 0 {
		errs = append(errs, errors.New("no Kafka brokers: set --kafka-brokers or EVENTFORGE_KAFKA_BROKERS"))
	}
	if c.Token != "" {
		if err := c.Token.Validate("console token"); err != nil {
			errs = append(errs, err)
		}
	} else if c.HTTPAddr != "" && !secret.LoopbackOnly(c.HTTPAddr) && !c.InsecureNoAuth {
		errs = append(errs, fmt.Errorf("--http-addr %s is reachable beyond this machine: set --console-token-file (or --console-token), or --insecure-no-auth to serve without one", c.HTTPAddr))
	}
	if c.Demo && c.Bin == "" {
		errs = append(errs, errors.New("demo mode needs the eventforge binary"))
	}
	if !c.Demo && (c.Slot == "" || c.Topic == "" || c.Group == "") {
		errs = append(errs, fmt.Errorf("read-only mode needs --slot, --topic and --group (got %q, %q, %q)", c.Slot, c.Topic, c.Group))
	}
	return errors.Join(errs...)
}

// consumer is the inbox consumer name of the group.
func (c Config) consumer() string {
	if c.Consumer != "" {
		return c.Consumer
	}
	return c.Group
}

func (c Config) brokerList() string { return strings.Join(c.Kafka.Brokers, ",") }

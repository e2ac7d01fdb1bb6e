// Package failpoint lets a test make an EventForge process die or hang at a
// named point of the relay or the worker, to prove what survives a crash in
// each failure window (docs/design.md#failure-windows).
//
// Points are off unless the process was started with the environment
// variable EVENTFORGE_FAILPOINTS, which main reads once (Setup) before any
// command runs. Its value is a semicolon-separated list of point=action:
//
//	EVENTFORGE_FAILPOINTS='cdc/after-ack-before-confirm=crash;worker/after-commit-before-offset=crash-after=3'
//
// Actions:
//
//	crash          die at the first hit with SIGKILL: no deferred cleanup, no flush
//	crash-after=N  die at the Nth hit (the N-1 hits before it pass)
//	stall          block the goroutine that hits the point until the process is killed
//	stall-after=N  stall at the Nth hit
//	pause          block the goroutine that hits the point for PauseFor (10s) at the first hit, then go on
//	pause-after=N  pause at the Nth hit
//	off            never fire (the same as leaving the point out)
//
// Before it fires, a point writes one line "eventforge: failpoint NAME: ACTION"
// to stderr, so a test can tell which point fired.
//
// The points:
//
//	cdc/after-produce-before-ack    relay: a record was handed to the Kafka producer; its ack is not yet seen
//	cdc/after-ack-before-confirm    relay: the broker's ack was recorded in the ack tracker; no status update has
//	                                confirmed it yet
//	cdc/after-confirm               relay: a standby status update that moved the confirmed position was sent
//	cdc/mid-transaction             relay: an event was read from the slot and queued for the producer (hit once
//	                                per event: crash-after=N dies after the Nth event, mid-way through a large
//	                                transaction)
//	cdc/eos-before-kafka-commit     relay, --exactly-once: a Kafka transaction's records and position are handed
//	                                to the producer; CommitTxn not called
//	cdc/eos-after-kafka-commit      relay, --exactly-once: a Kafka transaction committed; its events are not yet
//	                                acked in the tracker, nothing confirmed to the slot
//	worker/inside-tx-before-commit  worker: the inbox row and the handler's change are written; COMMIT not sent
//	worker/after-commit-before-offset  worker: the transaction committed; its offset is not yet marked
//	worker/after-dlq-produce-before-ack  worker: a dead letter was handed to the producer; the broker's ack is not
//	                                yet returned to the worker
//
// When no point is set, Hit costs one atomic load and allocates nothing.
//
// Imports (floor: shared library, product-safe): no other EventForge
// package.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar is the environment variable Setup reads.
const EnvVar = "EVENTFORGE_FAILPOINTS"

// The names of every point. Hit panics on none of them; Parse rejects names
// not listed here, so a typo in a test fails loudly instead of never firing.
const (
	CDCAfterProduceBeforeAck       = "cdc/after-produce-before-ack"
	CDCAfterAckBeforeConfirm       = "cdc/after-ack-before-confirm"
	CDCAfterConfirm                = "cdc/after-confirm"
	CDCMidTransaction              = "cdc/mid-transaction"
	CDCEOSBeforeKafkaCommit        = "cdc/eos-before-kafka-commit"
	CDCEOSAfterKafkaCommit         = "cdc/eos-after-kafka-commit"
	WorkerInsideTxBeforeCommit     = "worker/inside-tx-before-commit"
	WorkerAfterCommitBeforeOffset  = "worker/after-commit-before-offset"
	WorkerAfterDLQProduceBeforeAck = "worker/after-dlq-produce-before-ack"
)

// Names lists every point, sorted.
func Names() []string {
	n := []string{
		CDCAfterProduceBeforeAck, CDCAfterAckBeforeConfirm, CDCAfterConfirm, CDCMidTransaction,
		CDCEOSBeforeKafkaCommit, CDCEOSAfterKafkaCommit,
		WorkerInsideTxBeforeCommit, WorkerAfterCommitBeforeOffset, WorkerAfterDLQProduceBeforeAck,
	}
	sort.Strings(n)
	return n
}

func known(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}

// ErrSpec marks an invalid EVENTFORGE_FAILPOINTS value.
var ErrSpec = errors.New("invalid " + EnvVar)

type action int

const (
	actOff action = iota
	actCrash
	actStall
	actPause
)

// PauseFor is how long the pause action blocks the goroutine that hits the
// point.
const PauseFor = 10 * time.Second

func (a action) String() string {
	switch a {
	case actCrash:
		return "crash"
	case actStall:
		return "stall"
	case actPause:
		return "pause"
	}
	return "off"
}

type point struct {
	act  action
	at   int64 // fire on this hit (1 = the first)
	hits atomic.Int64
}

// Set is a parsed configuration: which points fire, and how.
type Set struct {
	points map[string]*point
	// fire carries out an action; replaced in this package's tests.
	fire func(name string, a action)
}

// Parse reads a specification in the format of EVENTFORGE_FAILPOINTS. An
// empty one yields nil: no point fires.
func Parse(spec string) (*Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	s := &Set{points: map[string]*point{}, fire: fire}
	for _, item := range strings.Split(spec, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("%w: %q: want point=action", ErrSpec, item)
		}
		if !known(name) {
			return nil, fmt.Errorf("%w: unknown point %q (known: %s)", ErrSpec, name, strings.Join(Names(), ", "))
		}
		p, err := parseAction(strings.TrimSpace(act))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrSpec, name, err)
		}
		if _, dup := s.points[name]; dup {
			return nil, fmt.Errorf("%w: point %q given twice", ErrSpec, name)
		}
		s.points[name] = p
	}
	return s, nil
}

func parseAction(a string) (*point, error) {
	kind, n, hasN := strings.Cut(a, "-after=")
	p := &point{at: 1}
	switch kind {
	case "crash":
		p.act = actCrash
	case "stall":
		p.act = actStall
	case "pause":
		p.act = actPause
	case "off":
		if hasN {
			return nil, fmt.Errorf("action %q: off takes no count", a)
		}
		p.act = actOff
	default:
		return nil, fmt.Errorf("unknown action %q: want crash, crash-after=N, stall, stall-after=N, pause, pause-after=N or off", a)
	}
	if hasN {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("action %q: the count must be a whole number >= 1", a)
		}
		p.at = v
	}
	return p, nil
}

// String renders the set in the format Parse reads, points sorted.
func (s *Set) String() string {
	if s == nil {
		return ""
	}
	var parts []string
	for _, name := range Names() {
		p, ok := s.points[name]
		if !ok {
			continue
		}
		a := p.act.String()
		if p.at > 1 {
			a += "-after=" + strconv.FormatInt(p.at, 10)
		}
		parts = append(parts, name+"="+a)
	}
	return strings.Join(parts, ";")
}

// hit counts a hit of name and carries out its action when due.
func (s *Set) hit(name string) {
	p := s.points[name]
	if p == nil || p.act == actOff {
		return
	}
	if p.hits.Add(1) == p.at {
		s.fire(name, p.act)
	}
}

// active is the process's set. It is the only package state: the points are
// one-line calls deep inside the relay and the worker, and threading a
// handle through every layer for a test-only switch would cost more than
// this; it is written once, by Setup from main, and never by an init.
var active atomic.Pointer[Set]

// Setup installs the points of spec (the value of EVENTFORGE_FAILPOINTS) for
// the whole process. main calls it once, before any command runs.
func Setup(spec string) error {
	s, err := Parse(spec)
	if err != nil {
		return err
	}
	active.Store(s)
	return nil
}

// Hit marks that the process reached the point name. It does nothing unless
// Setup enabled that point.
func Hit(name string) {
	if s := active.Load(); s != nil {
		s.hit(name)
	}
}

// fire carries out a real action: SIGKILL of the own process, or a block
// that only the end of the process ends.
func fire(name string, a action) {
	fmt.Fprintf(os.Stderr, "eventforge: failpoint %s: %s\n", name, a)
	if a == actPause {
		time.Sleep(PauseFor)
		return
	}
	if a == actCrash {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	// A stall, or the instant between kill(2) and the signal's delivery.
	// A sleeping goroutine, unlike select {}, never trips the runtime's
	// deadlock check in a process with no other goroutine.
	for {
		time.Sleep(time.Hour)
	}
}

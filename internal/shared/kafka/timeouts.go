package kafka

import (
	"errors"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/fielderr"
)

// Defaults of Timeouts. They are sized against the way a broker is lost: a
// dead broker closes or refuses its connections, but a frozen one (a paused
// VM, a process stopped by SIGSTOP, a network that drops packets) keeps
// them open, and only a client timeout ends the wait. The controller fences
// a silent broker after broker.session.timeout.ms (9 s by default) and
// elects new leaders. Each new connection to a frozen broker costs up to
// three request timeouts (sarama's version handshake, tried twice, then the
// request), so the relay and the worker look leaders up with a
// LeaderLookup rather than go back to it; a request already sent to it
// waits one request timeout. sarama's own 30 s read timeout held a frozen
// leader's partitions for 30 s (docs/operations.md has the figures).
const (
	// DefaultDialTimeout bounds opening a connection (TCP and TLS).
	DefaultDialTimeout = 5 * time.Second
	// DefaultRequestTimeout bounds writing a request and waiting for its
	// response, on every connection of the client.
	DefaultRequestTimeout = 3 * time.Second
	// DefaultProduceTimeout is how long a partition leader waits for its
	// in-sync replicas before it answers a produce request (acks=all) with
	// a timeout, which the producer retries. It stays below the request
	// timeout, so a healthy leader waiting for a slow follower answers
	// before the client gives up on the connection.
	DefaultProduceTimeout = 2 * time.Second
	// DefaultMetadataTimeout bounds one metadata refresh, its retries
	// included; the caller (a producer's retry, a topic lookup) tries again
	// after it.
	DefaultMetadataTimeout = 15 * time.Second
)

// Timeouts bound how long a client waits on the brokers; a zero field takes
// its default.
type Timeouts struct {
	Dial     time.Duration // a new connection; default DefaultDialTimeout (5 s)
	Request  time.Duration // a request's write and its response's read; default DefaultRequestTimeout (3 s)
	Produce  time.Duration // the leader's wait for in-sync replicas; below Request; default DefaultProduceTimeout (2 s)
	Metadata time.Duration // one metadata refresh, retries included; default DefaultMetadataTimeout (15 s)
}

// withDefaults fills zero fields.
func (t Timeouts) withDefaults() Timeouts {
	set := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	set(&t.Dial, DefaultDialTimeout)
	set(&t.Request, DefaultRequestTimeout)
	set(&t.Produce, DefaultProduceTimeout)
	set(&t.Metadata, DefaultMetadataTimeout)
	return t
}

// Validate reports every timeout that cannot work, zero fields checked with
// their defaults.
func (t Timeouts) Validate() error {
	t = t.withDefaults()
	var errs []error
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"Config.Kafka.Timeouts.Dial", t.Dial},
		{"Config.Kafka.Timeouts.Request", t.Request},
		{"Config.Kafka.Timeouts.Produce", t.Produce},
		{"Config.Kafka.Timeouts.Metadata", t.Metadata},
	} {
		if d.v < 0 {
			errs = append(errs, fielderr.New(d.field, "%s: must be positive (0: the default)", d.v))
		}
	}
	if t.Produce > 0 && t.Produce < time.Millisecond {
		errs = append(errs, fielderr.New("Config.Kafka.Timeouts.Produce", "%s: Kafka counts it in milliseconds", t.Produce))
	}
	if t.Request > 0 && t.Produce >= t.Request {
		errs = append(errs, fielderr.New("Config.Kafka.Timeouts.Produce",
			"%s is not below the request timeout %s: a leader waiting for its replicas would answer after the client gave up on the connection", t.Produce, t.Request))
	}
	return errors.Join(errs...)
}

// apply sets the timeouts on a sarama configuration: the connection's
// dial, read and write deadlines, the produce requests' replica wait and
// the metadata refresh bound.
func (t Timeouts) apply(sc *sarama.Config) {
	t = t.withDefaults()
	sc.Net.DialTimeout = t.Dial
	sc.Net.ReadTimeout = t.Request
	sc.Net.WriteTimeout = t.Request
	sc.Producer.Timeout = t.Produce
	sc.Metadata.Timeout = t.Metadata
}

package cdc

import (
	"errors"
	"fmt"
	"time"
)

// ErrServerSilent ends a stream session whose replication connection brought
// nothing, neither data nor keepalive, for longer than the receive bound: the
// connection is presumed dead (a half-open TCP connection would otherwise
// look healthy until the kernel gives up, many minutes later). The relay
// reconnects.
var ErrServerSilent = errors.New("no message from PostgreSQL on the replication connection")

// silenceSlack is added to the derived receive bound for scheduling and
// network jitter.
const silenceSlack = 5 * time.Second

// receiveBound is how long the relay waits for any message from the server
// before it presumes the replication connection dead. A configured timeout
// wins, but never below two status intervals: a live server answers the
// status update that asks for a reply (sent after a status interval of
// silence) at once. Derived, it is the longest of three heartbeat intervals
// (the relay receives its own heartbeat), three status intervals and the
// server's wal_sender_timeout, plus silenceSlack.
func receiveBound(configured, heartbeat, status, walSenderTimeout time.Duration) time.Duration {
	floor := 2*status + pollInterval
	if configured > 0 {
		return max(configured, floor)
	}
	d := max(3*status, walSenderTimeout)
	if heartbeat > 0 {
		d = max(d, 3*heartbeat)
	}
	return max(d+silenceSlack, floor)
}

// checkSilence fails the session when the server has been silent beyond
// the bound.
func (s *stream) checkSilence(now time.Time) error {
	if s.silence <= 0 {
		return nil
	}
	if quiet := now.Sub(s.lastRecv); quiet > s.silence {
		return fmt.Errorf("%w for %s (bound %s): connection presumed dead", ErrServerSilent, quiet.Round(time.Millisecond), s.silence)
	}
	return nil
}

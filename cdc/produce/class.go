package produce

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// Class is what the engine does with a record, or a generation, the broker
// refused.
type Class int

const (
	// Retry: the error may pass (a leader moving, a timeout, a broken
	// connection); the same generation is sent again, with the same
	// sequence numbers, a bounded number of times.
	Retry Class = iota
	// Reject: the record can never be accepted; it is set aside with the
	// broker's reason and its neighbours go on.
	Reject
	// TooLarge: the broker refused the batch as too large; a generation of
	// several records is split, a single record is decided by its topic's
	// limit.
	TooLarge
	// Fatal: nothing will be accepted until an operator acts
	// (authorization, a missing topic, an unsupported setting).
	Fatal
	// Restart: the broker no longer knows this producer's sequence state;
	// a new session with a new producer id starts from the confirmed
	// position.
	Restart
)

func (c Class) String() string {
	switch c {
	case Retry:
		return "retry"
	case Reject:
		return "reject"
	case TooLarge:
		return "too-large"
	case Fatal:
		return "fatal"
	case Restart:
		return "restart"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Classify sorts a produce error. Errors that are not broker error codes
// (connections, a closed client, timeouts) are retried.
func Classify(err error) Class {
	var pe sarama.PacketEncodingError
	if errors.As(err, &pe) {
		return Reject // the record cannot be encoded: it never will be
	}
	var ke sarama.KError
	if !errors.As(err, &ke) {
		return Retry
	}
	switch ke {
	case sarama.ErrMessageSizeTooLarge, sarama.ErrMessageSetSizeTooLarge:
		return TooLarge
	case sarama.ErrInvalidTimestamp, // outside the topic's message.timestamp.{before,after}.max.ms
		sarama.ErrInvalidRecord,   // a broker-side record validation failed
		sarama.ErrInvalidMessage,  // CORRUPT_MESSAGE: the record fails its CRC or a check of its content
		sarama.ErrInvalidTopic,    // the broker calls the topic name invalid
		sarama.ErrPolicyViolation: // a broker policy refuses the record
		return Reject
	case sarama.ErrTopicAuthorizationFailed,
		sarama.ErrClusterAuthorizationFailed,
		sarama.ErrTransactionalIDAuthorizationFailed,
		sarama.ErrSASLAuthenticationFailed,
		sarama.ErrUnknownTopicOrPartition, // the topic is gone and the relay does not recreate it mid-session
		sarama.ErrUnsupportedVersion,
		sarama.ErrUnsupportedForMessageFormat,
		sarama.ErrUnsupportedCompressionType,
		sarama.ErrInvalidRequiredAcks,
		sarama.ErrInvalidConfig:
		return Fatal
	case sarama.ErrOutOfOrderSequenceNumber,
		sarama.ErrUnknownProducerID,
		sarama.ErrInvalidProducerEpoch,
		sarama.ErrProducerFenced,
		sarama.ErrInvalidProducerIDMapping:
		return Restart
	}
	return Retry
}

// FatalHint tells the operator what to fix for an error that stops the
// relay.
func FatalHint(err error) string {
	switch {
	case errors.Is(err, sarama.ErrTopicAuthorizationFailed):
		return "grant the relay's principal WRITE (and DESCRIBE) on the topic, then restart the relay"
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed):
		return "grant the relay's principal IDEMPOTENT_WRITE on the cluster, then restart the relay"
	case errors.Is(err, sarama.ErrUnknownTopicOrPartition):
		return "the topic was deleted while the relay wrote to it: create it (or let the relay create it with --create-topics), then restart the relay"
	case errors.Is(err, sarama.ErrUnsupportedCompressionType):
		return "choose another --compression, then restart the relay"
	}
	return "fix the broker or relay configuration, then restart the relay"
}

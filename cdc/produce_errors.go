package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// produceClass is what the relay does with a record the producer handed
// back with an error.
type produceClass int

const (
	// produceRetry: the error may pass; the record is sent again in place
	// (nothing of its key is behind it in the producer), a bounded number
	// of times, then the session restarts.
	produceRetry produceClass = iota
	// produceReject: the record can never be accepted; it is recorded in
	// outbox_rejected with the broker's reason, then acked.
	produceReject
	// produceTooLarge: the broker refused the record's batch as too large;
	// whether the record itself is too large is decided against the
	// topic's current limit.
	produceTooLarge
	// produceFatal: nothing will be accepted until an operator acts
	// (authorization, a missing topic, an unsupported setting): the relay
	// stops with one error.
	produceFatal
)

func (c produceClass) String() string {
	switch c {
	case produceRetry:
		return "retry"
	case produceReject:
		return "reject"
	case produceTooLarge:
		return "too-large"
	case produceFatal:
		return "fatal"
	}
	return fmt.Sprintf("produceClass(%d)", int(c))
}

// classifyProduceError sorts an error of the async producer. Errors that
// are not broker error codes (connections, a closed client, timeouts) are
// retried. Retriable partition errors (a leader moving, too few in-sync
// replicas) reach the relay only after sarama's own retries ran out, and are
// retried again in place.
func classifyProduceError(err error) produceClass {
	var pe sarama.PacketEncodingError
	if errors.As(err, &pe) {
		return produceReject // the record cannot be encoded: it never will be
	}
	var ke sarama.KError
	if !errors.As(err, &ke) {
		return produceRetry
	}
	switch ke {
	case sarama.ErrMessageSizeTooLarge, sarama.ErrMessageSetSizeTooLarge:
		return produceTooLarge
	case sarama.ErrInvalidTimestamp, // outside the topic's message.timestamp.{before,after}.max.ms
		sarama.ErrInvalidRecord,   // a broker-side record validation failed
		sarama.ErrInvalidMessage,  // CORRUPT_MESSAGE: the record fails its CRC or a check of its content
		sarama.ErrInvalidTopic,    // the broker calls the topic name invalid
		sarama.ErrPolicyViolation: // a broker policy refuses the record
		return produceReject
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
		return produceFatal
	}
	return produceRetry
}

// fatalProduceHint tells the operator what to fix for an error that stops
// the relay.
func fatalProduceHint(err error) string {
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

// refusalClass classifies the broker's refusal err of p. A too-large
// refusal becomes a rejection when tooLarge finds the record over its
// topic's limit (else tooLarge's error ends the session); a rejection
// without a reason of its own gets the broker's.
func refusalClass(ctx context.Context, p *pending, err error,
	tooLarge func(context.Context, *pending, error) (string, error)) (produceClass, error) {
	class := classifyProduceError(err)
	if class == produceTooLarge {
		reason, terr := tooLarge(ctx, p, err)
		if terr != nil {
			return class, terr
		}
		p.reason, class = reason, produceReject
	}
	if class == produceReject && p.reason == "" {
		p.reason = fmt.Sprintf("the broker refused the record: %v", err)
	}
	return class, nil
}

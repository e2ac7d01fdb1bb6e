package produce

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/IBM/sarama"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Class
	}{
		{sarama.ErrUnknown, Retry},                    // UNKNOWN_SERVER_ERROR: maybe a broker bug of the moment: bounded retries, then a new session
		{sarama.ErrOutOfOrderSequenceNumber, Restart}, // the broker lost this producer's sequence: a new producer id
		{sarama.ErrNotLeaderForPartition, Retry},
		{sarama.ErrLeaderNotAvailable, Retry},
		{sarama.ErrNotEnoughReplicas, Retry},
		{sarama.ErrNotEnoughReplicasAfterAppend, Retry},
		{sarama.ErrRequestTimedOut, Retry},
		{sarama.ErrKafkaStorageError, Retry},
		{sarama.ErrUnknownProducerID, Restart},
		{sarama.ErrInvalidProducerEpoch, Restart},
		{sarama.ErrNetworkException, Retry},
		{sarama.ErrThrottlingQuotaExceeded, Retry},
		{sarama.ErrOutOfBrokers, Retry},
		{sarama.ErrNotConnected, Retry},
		{sarama.ErrIncompleteResponse, Retry},
		{sarama.ErrShuttingDown, Retry},
		{io.EOF, Retry},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), Retry},

		{sarama.ErrInvalidTimestamp, Reject},
		{sarama.ErrInvalidRecord, Reject},
		{sarama.ErrInvalidMessage, Reject},
		{sarama.ErrInvalidTopic, Reject},
		{sarama.ErrPolicyViolation, Reject},
		{sarama.PacketEncodingError{Info: "bad header"}, Reject},

		{sarama.ErrMessageSizeTooLarge, TooLarge},
		{sarama.ErrMessageSetSizeTooLarge, TooLarge},

		{sarama.ErrTopicAuthorizationFailed, Fatal},
		{sarama.ErrClusterAuthorizationFailed, Fatal},
		{sarama.ErrUnknownTopicOrPartition, Fatal},
		{sarama.ErrUnsupportedCompressionType, Fatal},
		{sarama.ErrUnsupportedForMessageFormat, Fatal},
		{sarama.ErrUnsupportedVersion, Fatal},
		{sarama.ErrInvalidRequiredAcks, Fatal},
		{sarama.ErrSASLAuthenticationFailed, Fatal},
		{fmt.Errorf("produce: %w", sarama.ErrTopicAuthorizationFailed), Fatal},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			if got := Classify(c.err); got != c.want {
				t.Fatalf("Classify(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestFatalProduceHintNamesTheFix(t *testing.T) {
	for err, want := range map[error]string{
		sarama.ErrTopicAuthorizationFailed:   "WRITE",
		sarama.ErrClusterAuthorizationFailed: "IDEMPOTENT_WRITE",
		sarama.ErrUnknownTopicOrPartition:    "create it",
		errors.New("other"):                  "configuration",
	} {
		if got := FatalHint(err); !strings.Contains(got, want) {
			t.Errorf("hint for %v = %q, want it to mention %q", err, got, want)
		}
	}
}

package cdc

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/IBM/sarama"
)

func TestClassifyProduceError(t *testing.T) {
	cases := []struct {
		err  error
		want produceClass
	}{
		{sarama.ErrUnknown, produceRetry}, // UNKNOWN_SERVER_ERROR: maybe a broker bug of the moment: bounded retries, then a new session
		{sarama.ErrOutOfOrderSequenceNumber, produceRetry},
		{sarama.ErrNotLeaderForPartition, produceRetry},
		{sarama.ErrLeaderNotAvailable, produceRetry},
		{sarama.ErrNotEnoughReplicas, produceRetry},
		{sarama.ErrNotEnoughReplicasAfterAppend, produceRetry},
		{sarama.ErrRequestTimedOut, produceRetry},
		{sarama.ErrKafkaStorageError, produceRetry},
		{sarama.ErrUnknownProducerID, produceRetry},
		{sarama.ErrInvalidProducerEpoch, produceRetry},
		{sarama.ErrNetworkException, produceRetry},
		{sarama.ErrThrottlingQuotaExceeded, produceRetry},
		{sarama.ErrOutOfBrokers, produceRetry},
		{sarama.ErrNotConnected, produceRetry},
		{sarama.ErrIncompleteResponse, produceRetry},
		{sarama.ErrShuttingDown, produceRetry},
		{io.EOF, produceRetry},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), produceRetry},

		{sarama.ErrInvalidTimestamp, produceReject},
		{sarama.ErrInvalidRecord, produceReject},
		{sarama.ErrInvalidMessage, produceReject},
		{sarama.ErrInvalidTopic, produceReject},
		{sarama.ErrPolicyViolation, produceReject},
		{sarama.PacketEncodingError{Info: "bad header"}, produceReject},

		{sarama.ErrMessageSizeTooLarge, produceTooLarge},
		{sarama.ErrMessageSetSizeTooLarge, produceTooLarge},

		{sarama.ErrTopicAuthorizationFailed, produceFatal},
		{sarama.ErrClusterAuthorizationFailed, produceFatal},
		{sarama.ErrUnknownTopicOrPartition, produceFatal},
		{sarama.ErrUnsupportedCompressionType, produceFatal},
		{sarama.ErrUnsupportedForMessageFormat, produceFatal},
		{sarama.ErrUnsupportedVersion, produceFatal},
		{sarama.ErrInvalidRequiredAcks, produceFatal},
		{sarama.ErrSASLAuthenticationFailed, produceFatal},
		{fmt.Errorf("produce: %w", sarama.ErrTopicAuthorizationFailed), produceFatal},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			if got := classifyProduceError(c.err); got != c.want {
				t.Fatalf("classifyProduceError(%v) = %v, want %v", c.err, got, c.want)
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
		if got := fatalProduceHint(err); !strings.Contains(got, want) {
			t.Errorf("hint for %v = %q, want it to mention %q", err, got, want)
		}
	}
}

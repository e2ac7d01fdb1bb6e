package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestProducerSessionErrorPaths drives the dispatcher against a MockBroker
// whose first produce answer is an error, with records A then B of one key,
// through the paths the key-gate test leaves out: a record too large for the
// topic is set aside with the reason the session gives; a too-large record
// the session cannot explain, and a rejection that cannot be recorded, end
// the run. Whatever ends the run, B is never sent.
func TestProducerSessionErrorPaths(t *testing.T) {
	const topic = "orders"
	errWrite := errors.New("write outbox_rejected: connection lost")
	errBatch := errors.New("the producer batches more than the topic accepts")
	cases := []struct {
		name     string
		err      sarama.KError
		tooLarge func(context.Context, *pending, error) (string, error)
		reject   error
		want     []string   // settlements, in order
		requests [][]string // the records of each produce request
		runErr   error
	}{
		{
			name: "too large: set aside with the session's reason", err: sarama.ErrMessageSizeTooLarge,
			tooLarge: func(context.Context, *pending, error) (string, error) { return "larger than the topic's limit", nil },
			want:     []string{"rejected A: larger than the topic's limit", "delivered B"}, requests: [][]string{{"A"}, {"B"}},
		},
		{
			name: "too large and unexplained: the run ends", err: sarama.ErrMessageSetSizeTooLarge,
			tooLarge: func(context.Context, *pending, error) (string, error) { return "", errBatch },
			requests: [][]string{{"A"}}, runErr: errBatch,
		},
		{
			name: "rejection not recorded: the run ends", err: sarama.ErrInvalidRecord, reject: errWrite,
			requests: [][]string{{"A"}}, runErr: errWrite,
		},
		{
			name: "rejection recorded with the broker's error", err: sarama.ErrPolicyViolation,
			want:     []string{"rejected A: the broker refused the record: " + sarama.ErrPolicyViolation.Error(), "delivered B"},
			requests: [][]string{{"A"}, {"B"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mockCluster(t, topic, sarama.NewMockProduceResponse(t).SetError(topic, 0, c.err), sarama.NewMockProduceResponse(t))
			prod := mockProducer(t, b)
			var mu sync.Mutex
			var got []string
			note := func(s string) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, s)
			}
			value := func(p *pending) string { v, _ := p.msg.Value.Encode(); return string(v) }
			tooLarge := c.tooLarge
			if tooLarge == nil {
				tooLarge = func(context.Context, *pending, error) (string, error) { return "", errors.New("unexpected too large") }
			}
			d := newDispatcher(prod, slog.New(slog.DiscardHandler), 16, dispatchHooks{
				admit:     func(context.Context, *pending) (bool, error) { return true, nil },
				delivered: func(p *pending) { note("delivered " + value(p)) },
				reject: func(_ context.Context, p *pending) error {
					if c.reject != nil {
						return c.reject
					}
					note(fmt.Sprintf("rejected %s: %s", value(p), p.reason))
					return nil
				},
				tooLarge: tooLarge,
				failed:   func(*pending, error) {},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := runAB(ctx, d, prod, topic)
			if ctx.Err() != nil {
				t.Fatal("timed out")
			}
			if (c.runErr == nil) != (err == nil) || c.runErr != nil && !errors.Is(err, c.runErr) {
				t.Fatalf("run = %v, want %v", err, c.runErr)
			}
			if !slices.EqualFunc(got, c.want, func(a, b string) bool { return strings.HasPrefix(a, b) }) || len(got) != len(c.want) {
				t.Errorf("settled %q, want %q", got, c.want)
			}
			if reqs := produced(b); !slices.EqualFunc(reqs, c.requests, slices.Equal) {
				t.Errorf("produce requests %v, want %v (B must not be sent while A is unsettled)", reqs, c.requests)
			}
		})
	}
}

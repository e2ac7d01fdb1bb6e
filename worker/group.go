package worker

import (
	"errors"
	"time"

	"github.com/IBM/sarama"
)

// groupHandler is the Runner's sarama.ConsumerGroupHandler. Sessions run
// one at a time, so one committer slot suffices.
type groupHandler struct {
	r         *Runner
	committer *committer // of the current session
}

// committer commits a session's marked offsets every interval from its own
// goroutine. A commit waits behind any long-polling fetch on the same broker
// connection (up to Consumer.MaxWaitTime), so the claim loops only mark and
// never commit themselves.
type committer struct {
	stop chan struct{}
	done chan struct{}
}

func startCommitter(sess sarama.ConsumerGroupSession, interval time.Duration) *committer {
	c := &committer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
				sess.Commit()
			}
		}
	}()
	return c
}

// close stops the committer and waits for a commit in progress.
func (c *committer) close() {
	close(c.stop)
	<-c.done
}

// Setup runs when a session starts: the group (re)balanced and this member
// joined it.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range sess.Claims() {
		n += len(ps)
	}
	h.r.m.rebalances.Inc()
	h.r.m.partitions.Set(float64(n))
	h.r.joined.Store(true)
	h.r.outages.kafka.ok("group")
	h.committer = startCommitter(sess, h.r.cfg.CommitInterval)
	h.r.cfg.Logger.Info("joined consumer group", "group", h.r.cfg.Group, "generation", sess.GenerationID(), "claims", sess.Claims())
	return nil
}

// Cleanup runs once every claim loop of the session has returned: it stops
// the committer and commits what was marked since, as auto-commit is off.
func (h *groupHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	if h.committer != nil {
		h.committer.close()
		h.committer = nil
	}
	sess.Commit()
	h.r.joined.Store(false)
	h.r.m.partitions.Set(0)
	h.r.cfg.Logger.Info("consumer group session ended", "group", h.r.cfg.Group, "generation", sess.GenerationID())
	return nil
}

// ConsumeClaim applies one partition's messages in order until the session
// ends or the claim closes. A message is taken with whatever else of the
// partition has already arrived, up to BatchSize and BatchBytes, so
// batching adds no wait.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r := h.r
	topic, partition := claim.Topic(), claim.Partition()
	p := r.newPartitionWorker(topic, partition, claim.Messages())
	defer r.m.dropLag(topic, partition)
	defer r.outages.release(p.key) // a revoked partition waits no more here
	mark := func(offset int64) { sess.MarkOffset(topic, partition, offset+1, "") }
	ctx := sess.Context()
	for {
		m := p.popAhead()
		if m == nil {
			select {
			case <-ctx.Done():
				return nil
			case next, ok := <-claim.Messages():
				if !ok {
					return nil
				}
				m = next
			}
		}
		// A batch cut short by BatchBytes hands the record it left over to
		// the next one.
		for m != nil {
			var msgs []*sarama.ConsumerMessage
			msgs, m = takeFrom(m, p.pop, r.cfg.BatchSize, r.cfg.BatchBytes)
			r.m.batchSize.Observe(float64(len(msgs)))
			err := p.process(ctx, msgs, mark)
			r.m.setLag(topic, partition, claim.HighWaterMarkOffset()-msgs[len(msgs)-1].Offset-1)
			if err == nil {
				r.outages.kafka.ok("group") // messages flow again
			}
			switch {
			case errors.Is(err, errStopped):
				return nil
			case err != nil:
				r.fail(err)
				return err
			}
		}
	}
}

// take returns first followed by the messages already waiting in ch, up to
// n messages and (after the first) maxBytes of keys and values, without
// blocking. A message that would pass maxBytes is returned as carry, to
// begin the next batch.
func take(first *sarama.ConsumerMessage, ch <-chan *sarama.ConsumerMessage, n, maxBytes int) (msgs []*sarama.ConsumerMessage, carry *sarama.ConsumerMessage) {
	return takeFrom(first, func() *sarama.ConsumerMessage { return receive(ch) }, n, maxBytes)
}

// receive returns the message waiting in ch, or nil when none is (or ch is
// closed), without blocking.
func receive(ch <-chan *sarama.ConsumerMessage) *sarama.ConsumerMessage {
	select {
	case m := <-ch:
		return m
	default:
		return nil
	}
}

// takeFrom is take reading the waiting messages from next, which returns
// nil when there is none.
func takeFrom(first *sarama.ConsumerMessage, next func() *sarama.ConsumerMessage, n, maxBytes int) (msgs []*sarama.ConsumerMessage, carry *sarama.ConsumerMessage) {
	msgs = make([]*sarama.ConsumerMessage, 1, min(n, 256))
	msgs[0] = first
	size := recordBytes(first)
	for len(msgs) < n {
		m := next()
		if m == nil {
			return msgs, nil
		}
		if size += recordBytes(m); size > maxBytes {
			return msgs, m
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func recordBytes(m *sarama.ConsumerMessage) int { return len(m.Key) + len(m.Value) }

package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// DefaultKafkaProbeInterval is how often a streaming relay asks the brokers
// whether they answer, so that an idle relay notices an unreachable Kafka.
const DefaultKafkaProbeInterval = 5 * time.Second

// minKafkaProbeTimeout is the least time a probe may take before Kafka
// counts as unreachable; the timeout is twice the interval when that is
// longer.
const minKafkaProbeTimeout = 5 * time.Second

// watchKafka probes the session's client every KafkaProbeInterval until ctx
// ends, and reports each result to setKafka. One probe at most is in flight;
// it ends at the latest when the session closes the client.
func (r *Relay) watchKafka(ctx context.Context, client sarama.Client) {
	tick := time.NewTicker(r.cfg.KafkaProbeInterval)
	defer tick.Stop()
	timeout := max(2*r.cfg.KafkaProbeInterval, minKafkaProbeTimeout)
	var inflight chan error
	var began time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if inflight == nil {
			inflight, began = make(chan error, 1), time.Now()
			go func(done chan<- error) { done <- probeBrokers(client) }(inflight)
		}
		wait := time.NewTimer(timeout - time.Since(began))
		select {
		case err := <-inflight:
			inflight = nil
			r.setKafka(err)
		case <-wait.C:
			r.setKafka(fmt.Errorf("no broker answered within %s", timeout))
		case <-ctx.Done():
		}
		wait.Stop()
	}
}

// probeBrokers asks every broker the client knows for its API versions, the
// cheapest request there is, until one answers: Kafka is reachable when any
// broker is. A broker whose connection broke is closed by sarama and dialled
// again by the next probe.
func probeBrokers(client sarama.Client) error {
	brokers := client.Brokers()
	if len(brokers) == 0 {
		if b := client.LeastLoadedBroker(); b != nil {
			brokers = []*sarama.Broker{b}
		}
	}
	errs := []error{errors.New("no broker known")}
	for _, b := range brokers {
		_ = b.Open(client.Config()) // ErrAlreadyConnected when open
		_, err := b.ApiVersions(&sarama.ApiVersionsRequest{})
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("broker %s: %w", b.Addr(), err))
	}
	if len(errs) > 1 {
		errs = errs[1:]
	}
	return errors.Join(errs...)
}

// setKafka records a probe's result: readiness and the gauge follow it, and
// each change is logged once.
func (r *Relay) setKafka(err error) {
	r.mu.Lock()
	was := r.kafkaErr
	r.kafkaErr = ""
	if err != nil {
		r.kafkaErr = oneLineErr(err)
	}
	now := r.kafkaErr
	r.mu.Unlock()
	r.m.kafkaReachable.Set(b2f(now == ""))
	switch {
	case was == "" && now != "":
		r.log.Warn("Kafka unreachable; not ready until a broker answers", "err", now)
	case was != "" && now == "":
		r.log.Info("Kafka reachable again")
	}
}

// oneLineErr is err's text on one line (errors.Join puts one per line).
func oneLineErr(err error) string {
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' {
			b[i] = ';'
		}
	}
	return string(b)
}

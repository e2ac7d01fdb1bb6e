package cdc

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// watchKafka probes the brokers every KafkaProbeInterval until ctx ends,
// and reports each result to setKafka. The probe runs on a client of its
// own, with connections of its own: on the producer's connections (one open
// request each) it waited behind produce requests and reported a Kafka that
// answered as unreachable. One probe at most is in flight.
func (r *Relay) watchKafka(ctx context.Context) {
	p := &kafkaProbe{brokers: r.cfg.Kafka.Brokers, sc: r.probeConfig()}
	defer p.close()
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
			go func(done chan<- error) { done <- p.probe() }(inflight)
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

// probeConfig is the probe client's configuration: the relay's brokers,
// security and timeouts, under a client id of its own.
func (r *Relay) probeConfig() *sarama.Config {
	sc := r.cfg.Kafka.Base()
	sc.ClientID += "-probe"
	sc.Metadata.AllowAutoTopicCreation = false
	return sc
}

// kafkaProbe asks the brokers whether they answer, on its own client. The
// client is made by the first probe that can and kept until close.
type kafkaProbe struct {
	brokers []string
	sc      *sarama.Config
	mu      sync.Mutex
	client  sarama.Client
	closed  bool
}

// probe returns nil when any broker of the cluster answers. Every known
// broker is asked at once, so a frozen one (which answers nothing until the
// request timeout) does not hide the others.
func (p *kafkaProbe) probe() error {
	client, err := p.connect()
	if err != nil {
		return err
	}
	brokers := client.Brokers()
	if len(brokers) == 0 {
		if b := client.LeastLoadedBroker(); b != nil {
			brokers = []*sarama.Broker{b}
		}
	}
	if len(brokers) == 0 {
		return errors.New("no broker known")
	}
	return firstAnswer(len(brokers), func(i int) error {
		b := brokers[i]
		_ = b.Open(client.Config()) // ErrAlreadyConnected when open
		if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil {
			// sarama keeps failing a connection that timed out; the
			// next probe dials again.
			_ = b.Close()
			return fmt.Errorf("broker %s: %w", b.Addr(), err)
		}
		return nil
	})
}

// connect returns the probe's client, making it when there is none yet (a
// failure is the probe's answer: no broker gave the cluster's metadata).
func (p *kafkaProbe) connect() (sarama.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("probe closed")
	}
	if p.client == nil {
		c, err := sarama.NewClient(p.brokers, p.sc)
		if err != nil {
			return nil, err
		}
		p.client = c
	}
	return p.client, nil
}

// close closes the probe's client; a probe in flight ends with an error.
func (p *kafkaProbe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.client != nil {
		_ = p.client.Close()
	}
}

// firstAnswer runs ask(0) … ask(n-1) at once and returns nil as soon as one
// returns nil, or every error (errors.Join) when none does. Calls still
// running when it returns finish on their own.
func firstAnswer(n int, ask func(i int) error) error {
	results := make(chan error, n)
	for i := range n {
		go func() { results <- ask(i) }()
	}
	var errs []error
	for range n {
		err := <-results
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// setKafka records a probe's result: readiness and the gauge follow it, and
// each change is logged once.
func (r *Relay) setKafka(err error) {
	r.mu.Lock()
	// The line is written before the new state shows (readiness, the
	// gauge): whoever sees the change finds its line in the log.
	defer r.mu.Unlock()
	was := r.kafkaErr
	now := ""
	if err != nil {
		now = oneLineErr(err)
	}
	switch {
	case was == "" && now != "":
		r.log.Warn("Kafka unreachable; not ready until a broker answers", "err", now)
	case was != "" && now == "":
		r.log.Info("Kafka reachable again")
	}
	r.kafkaErr = now
	r.m.kafkaReachable.Set(b2f(now == ""))
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

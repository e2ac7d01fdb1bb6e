package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Console is the console's core: what it looks at, the demo it runs, the
// current scenario run and the live-update subscribers.
type Console struct {
	cfg  Config
	log  *slog.Logger
	demo *demo // nil in read-only mode
	obs  *observer
	hub  *hub

	ctl sync.Mutex // one Start or Stop at a time: each restores the demo processes
	mu  sync.Mutex
	cur *run
}

// New connects to the pipeline (read-only) or starts the demo pipeline
// (cfg.Demo). Close stops what it started.
func New(ctx context.Context, cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Console{cfg: cfg, log: log, hub: newHub()}
	t := target{pgURL: cfg.PGURL, slot: cfg.Slot, topic: cfg.Topic, group: cfg.Group, consumer: cfg.consumer(),
		relayMetrics: cfg.RelayMetrics, workerMetrics: func() []string { return cfg.WorkerMetrics }}
	if cfg.Demo {
		log.Info("starting the demo pipeline")
		d, err := startDemo(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("start demo: %w", err)
		}
		c.demo = d
		t = target{pgURL: d.dbURL, slot: d.slot, topic: d.topic(), group: d.group, consumer: d.group,
			relayMetrics: d.relayAddr, workerMetrics: d.workerAddrs, effects: true}
	}
	obs, err := newObserver(ctx, t, cfg.Kafka)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.obs = obs
	return c, nil
}

// Close stops the current run and the demo pipeline, and removes the demo's
// database, slot and topics.
func (c *Console) Close() {
	c.mu.Lock()
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cur != nil {
		cur.stop()
	}
	if c.obs != nil {
		c.obs.close()
	}
	if c.demo != nil {
		c.demo.close(context.Background())
	}
	c.hub.close()
}

// errUnknownScenario is returned for a scenario name the console lacks.
var errUnknownScenario = errors.New("unknown scenario")

// Start stops the current run, leaves the demo healthy and starts a new run
// of the scenario (no step taken yet).
func (c *Console) Start(ctx context.Context, name string) (RunView, error) {
	if c.demo == nil {
		return RunView{}, errNotDemo
	}
	sc := findScenario(name)
	if sc == nil {
		return RunView{}, fmt.Errorf("%w %q", errUnknownScenario, name)
	}
	c.ctl.Lock()
	defer c.ctl.Unlock()
	if err := c.stop(ctx); err != nil {
		return RunView{}, err
	}
	r := newRun(context.Background(), sc, c.demo, c.obs, c.publishRun)
	c.mu.Lock()
	c.cur = r
	c.mu.Unlock()
	c.publishRun()
	return r.view(), nil
}

// Stop cancels the current run (its step in progress ends first) and leaves
// the demo processes healthy: gates open, no failpoints, all ready.
func (c *Console) Stop(ctx context.Context) error {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	return c.stop(ctx)
}

func (c *Console) stop(ctx context.Context) error {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cur != nil {
		cur.stop()
		c.publishRun()
	}
	if c.demo == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	return c.demo.ensureHealthy(ctx)
}

// Next takes the current run's next step. If ctx ends first (the page went
// away), the step still completes and is published to subscribers.
func (c *Console) Next(ctx context.Context) (Snapshot, error) {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cur == nil {
		return Snapshot{}, errors.New("no scenario started")
	}
	type result struct {
		s   Snapshot
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := cur.next()
		ch <- result{s, err}
	}()
	select {
	case res := <-ch:
		return res.s, res.err
	case <-ctx.Done():
		return Snapshot{}, ctx.Err()
	}
}

// RunToEnd takes every remaining step (the page without scripts).
func (c *Console) RunToEnd(ctx context.Context, name string) (RunView, error) {
	v, err := c.Start(ctx, name)
	if err != nil {
		return v, err
	}
	for range v.Steps {
		if _, err := c.Next(ctx); err != nil {
			break
		}
	}
	return c.Current(), nil
}

// Current is the current run (the zero view when none).
func (c *Console) Current() RunView {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cur == nil {
		return RunView{}
	}
	return cur.view()
}

// Processes are the demo's processes (none in read-only mode).
func (c *Console) Processes() []procStatus {
	if c.demo == nil {
		return nil
	}
	var out []procStatus
	for _, p := range c.demo.procs() {
		out = append(out, p.status())
	}
	return out
}

// Info is what the console looks at, for the page and the tests.
type Info struct {
	Demo     bool   `json:"demo"`
	Database string `json:"database"`
	Slot     string `json:"slot"`
	Topic    string `json:"topic"`
	Group    string `json:"group"`
	Consumer string `json:"consumer"`
	API      string `json:"api,omitempty"`
	LogDir   string `json:"log_dir,omitempty"`
}

// Info describes the target.
func (c *Console) Info() Info {
	i := Info{Demo: c.demo != nil, Slot: c.obs.t.slot, Topic: c.obs.t.topic, Group: c.obs.t.group, Consumer: c.obs.t.consumer, API: c.cfg.APIURL}
	if c.demo != nil {
		i.Database, i.API, i.LogDir = c.demo.dbName, "http://"+c.demo.apiAddr, c.demo.dir
	}
	return i
}

// Order reads an order's state now.
func (c *Console) Order(ctx context.Context, id string) (Facts, Cards, error) {
	f, err := c.obs.facts(ctx, id, "")
	return f, cardsOf(f), err
}

func (c *Console) publishRun() { c.hub.publish("run", c.Current()) }

package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Snapshot is what one step showed: the real state read right after its
// action, and the evidence the action produced.
type Snapshot struct {
	Step     int       `json:"step"`
	Title    string    `json:"title"`
	Node     string    `json:"node"` // the diagram node where the event is
	Explain  string    `json:"explain"`
	Evidence []string  `json:"evidence"`
	Cards    Cards     `json:"cards"`
	Facts    Facts     `json:"facts"`
	At       time.Time `json:"at"`
}

// RunView is a run as the page and the JSON endpoint see it.
type RunView struct {
	ID        string     `json:"id"`
	Scenario  string     `json:"scenario"`
	Title     string     `json:"title"`
	OrderID   string     `json:"order_id"`
	Steps     []StepView `json:"steps"`
	Snapshots []Snapshot `json:"snapshots"`
	Status    string     `json:"status"` // ready, stepping, done, failed, stopped
	Error     string     `json:"error,omitempty"`
	Outcome   string     `json:"outcome"`
}

// StepView is a step's title and explanation.
type StepView struct {
	Title   string `json:"title"`
	Explain string `json:"explain"`
}

// run is one scenario being stepped through against the demo pipeline.
type run struct {
	id      string
	sc      *scenario
	orderID string
	d       *demo
	obs     *observer

	ctx    context.Context
	cancel context.CancelFunc
	stepMu sync.Mutex // one step at a time; held by stop until the step in progress ends

	// Facts the steps pass on to later steps.
	walFrom  string
	eventID  string
	api      chan apiAnswer
	waiter   int // backend held at a gate
	baseline Signals
	pinned   *Facts // facts a step read itself, shown instead of a later read

	mu     sync.Mutex
	snaps  []Snapshot
	status string
	err    string
	onSnap func()
}

func newRun(parent context.Context, sc *scenario, d *demo, obs *observer, onSnap func()) *run {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	ctx, cancel := context.WithCancel(parent)
	return &run{id: id, sc: sc, orderID: "order-" + sc.name + "-" + id, d: d, obs: obs,
		ctx: ctx, cancel: cancel, status: "ready", onSnap: onSnap}
}

func (r *run) view() RunView {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := RunView{ID: r.id, Scenario: r.sc.name, Title: r.sc.title, OrderID: r.orderID,
		Snapshots: append([]Snapshot(nil), r.snaps...), Status: r.status, Error: r.err, Outcome: r.sc.outcome}
	for _, s := range r.sc.steps {
		v.Steps = append(v.Steps, StepView{Title: s.title, Explain: s.explain})
	}
	return v
}

// next runs the next step's real action, then reads the state and records
// it. It returns the snapshot; after the last step it returns the last one.
func (r *run) next() (Snapshot, error) {
	r.stepMu.Lock()
	defer r.stepMu.Unlock()
	r.mu.Lock()
	i := len(r.snaps)
	if r.status == "failed" || r.status == "stopped" || i >= len(r.sc.steps) {
		defer r.mu.Unlock()
		if i == 0 {
			return Snapshot{}, fmt.Errorf("run %s", r.status)
		}
		return r.snaps[i-1], nil
	}
	r.status = "stepping"
	r.mu.Unlock()

	st := r.sc.steps[i]
	ctx, cancel := context.WithTimeout(r.ctx, stepTimeout)
	defer cancel()
	evidence, err := st.do(ctx, r)
	if err == nil {
		var f Facts
		if r.pinned != nil {
			f, r.pinned = *r.pinned, nil
		} else {
			f, err = r.obs.facts(ctx, r.orderID, r.walFrom)
		}
		snap := Snapshot{Step: i + 1, Title: st.title, Node: stepNode(r.sc.name, i), Explain: st.explain, Evidence: evidence, Cards: cardsOf(f), Facts: f, At: time.Now().UTC()}
		if err == nil {
			r.mu.Lock()
			r.snaps = append(r.snaps, snap)
			r.status = "ready"
			if len(r.snaps) == len(r.sc.steps) {
				r.status = "done"
			}
			r.mu.Unlock()
			r.onSnap()
			return snap, nil
		}
	}
	r.mu.Lock()
	r.status, r.err = "failed", fmt.Sprintf("step %d (%s): %v", i+1, st.title, err)
	if r.ctx.Err() != nil {
		r.status, r.err = "stopped", ""
	}
	r.mu.Unlock()
	r.onSnap()
	return Snapshot{}, err
}

// stop cancels the run and waits for the step in progress to end.
func (r *run) stop() {
	r.cancel()
	r.stepMu.Lock()
	defer r.stepMu.Unlock()
	r.mu.Lock()
	if r.status != "done" && r.status != "failed" {
		r.status = "stopped"
	}
	r.mu.Unlock()
}

// stepTimeout bounds one step: the slowest waits for a consumer group to
// drop a killed member (its session timeout) and rebalance.
const stepTimeout = 60 * time.Second

// apiAnswer is the API's answer to the order's POST.
type apiAnswer struct {
	status int
	body   string
	err    error
}

// postOrder sends the order to the demo's API without waiting for the answer.
func (r *run) postOrder() {
	r.api = make(chan apiAnswer, 1)
	body, _ := json.Marshal(map[string]any{"id": r.orderID, "customer": "console", "amount": 4200, "currency": "EUR"})
	go func() {
		req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, "http://"+r.d.apiAddr+"/orders", bytes.NewReader(body))
		if err != nil {
			r.api <- apiAnswer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.api <- apiAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		r.api <- apiAnswer{status: resp.StatusCode, body: string(bytes.TrimSpace(b))}
	}()
}

// answer waits for the API's answer.
func (r *run) answer(ctx context.Context) (apiAnswer, error) {
	select {
	case a := <-r.api:
		return a, a.err
	case <-ctx.Done():
		return apiAnswer{}, fmt.Errorf("wait for the API: %w", ctx.Err())
	}
}

// until polls cond every 50 ms until it is true, fails, or ctx ends.
func until(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var last error
	for {
		ok, err := cond(ctx)
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("wait until %s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("wait until %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Topology is the pipeline's architecture as the console reads it now:
// the slot, the relays, every partition of the topic with its offsets and
// owner, the consumer group's members, the dead-letter topic, and the rates
// derived from the processes' counters. The page draws its diagram from it.
type Topology struct {
	Topic      string          `json:"topic"`
	DLQTopic   string          `json:"dlq_topic"`
	Group      string          `json:"group"`
	Slot       SlotView        `json:"slot"`
	Relays     []RelayView     `json:"relays"`
	Partitions []PartitionView `json:"partitions"`
	Members    []MemberView    `json:"members"`
	DLQ        DLQView         `json:"dlq"`
	Rates      Rates           `json:"rates"`
	// Rebalances is the workers' eventforge_worker_rebalances_total summed
	// (nil without worker metrics); AssignmentChanges counts the changes of
	// the group's assignment the console itself saw, ChangedAt the last one.
	Rebalances        *float64   `json:"rebalances"`
	AssignmentChanges int        `json:"assignment_changes"`
	ChangedAt         *time.Time `json:"assignment_changed_at,omitempty"`
	Errors            []string   `json:"errors,omitempty"`
	ReadAt            time.Time  `json:"read_at"`
}

// SlotView is the replication slot: its confirmed position, the WAL between
// it and the current position (lag), and the WAL it retains (from restart_lsn).
type SlotView struct {
	Name          string `json:"name"`
	ConfirmedLSN  string `json:"confirmed_lsn"`
	Active        bool   `json:"active"`
	LagBytes      *int64 `json:"lag_bytes"`
	RetainedBytes *int64 `json:"retained_bytes"`
}

// RelayView is one relay process: active (streams from the slot), standby
// (waits for the slot), reconnecting, stopped or unknown.
type RelayView struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

// PartitionView is one partition of the topic: its high watermark, the
// group's committed offset (-1: none), the lag, and the member owning it
// ("" when unassigned).
type PartitionView struct {
	Partition     int32  `json:"partition"`
	HighWatermark int64  `json:"high_watermark"`
	Committed     int64  `json:"committed"`
	Lag           int64  `json:"lag"`
	Owner         string `json:"owner"`
}

// MemberView is one member of the consumer group and the partitions Kafka
// assigned it. Name is a short stable label ("member 1", …, by member id).
type MemberView struct {
	Name       string  `json:"name"`
	ID         string  `json:"id"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
	Partitions []int32 `json:"partitions"`
}

// DLQView is the dead-letter topic: the records it holds and the age of the
// oldest dead letter the workers know of.
type DLQView struct {
	Exists           bool     `json:"exists"`
	Depth            int64    `json:"depth"`
	OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
}

// Rates are per-second rates from the processes' counters between two
// reads at least rateWindow apart; nil when unknown.
type Rates struct {
	Published    *float64 `json:"published_per_second"`
	Consumed     *float64 `json:"consumed_per_second"`
	DeadLettered *float64 `json:"dead_lettered_per_second"`
}

// rateWindow is the shortest interval a rate is computed over; reads closer
// together return the last rate.
const rateWindow = 900 * time.Millisecond

// rater turns counters into rates, one per name.
type rater struct {
	mu    sync.Mutex
	prev  map[string]counterRead
	rates map[string]float64
}

type counterRead struct {
	v  float64
	at time.Time
}

func newRater() *rater { return &rater{prev: map[string]counterRead{}, rates: map[string]float64{}} }

// rate records counter name's value v read at at and returns its rate; nil
// until two reads exist. A counter that went down (a restart) counts from 0.
func (r *rater) rate(name string, v *float64, at time.Time) *float64 {
	if v == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.prev[name]
	if !ok {
		r.prev[name] = counterRead{*v, at}
		return nil
	}
	dt := at.Sub(p.at)
	if dt < rateWindow {
		if x, ok := r.rates[name]; ok {
			return &x
		}
		return nil
	}
	d := *v - p.v
	if d < 0 {
		d = *v
	}
	x := d / dt.Seconds()
	r.prev[name] = counterRead{*v, at}
	r.rates[name] = x
	return &x
}

// assignWatch notices changes of the group's assignment.
type assignWatch struct {
	mu      sync.Mutex
	last    string
	changes int
	at      *time.Time
}

func (w *assignWatch) see(members []MemberView, at time.Time) (int, *time.Time) {
	var b strings.Builder
	for _, m := range members {
		fmt.Fprintf(&b, "%s=%v;", m.ID, m.Partitions)
	}
	sig := b.String()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != "" && sig != w.last {
		w.changes++
		t := at
		w.at = &t
	}
	w.last = sig
	return w.changes, w.at
}

// topologyReuse is how long a topology read serves every page asking: the
// pages refresh every second, and several open pages cost one read.
const topologyReuse = 900 * time.Millisecond

// topology reads the architecture now, or returns the read of less than
// topologyReuse ago. relays are the demo's relay states (nil in read-only
// mode: the relay's metrics tell).
func (o *observer) topology(ctx context.Context, relays []RelayView) Topology {
	o.topoMu.Lock()
	defer o.topoMu.Unlock()
	if o.topo != nil && time.Since(o.topo.ReadAt) < topologyReuse {
		return *o.topo
	}
	t := o.readTopology(ctx, relays)
	o.topo = &t
	return t
}

func (o *observer) readTopology(ctx context.Context, relays []RelayView) Topology {
	t := Topology{Topic: o.t.topic, DLQTopic: o.t.topic + outbox.DLQSuffix, Group: o.t.group, ReadAt: time.Now().UTC()}
	fail := func(what string, err error) { t.Errors = append(t.Errors, fmt.Sprintf("%s: %v", what, err)) }
	t.Slot = o.slotView(ctx, fail)
	m := o.scrapeAll(ctx)
	t.Relays = relayViews(relays, m)
	if err := o.partitionViews(&t); err != nil {
		fail("read topic "+t.Topic, err)
	}
	t.DLQ = o.dlqView(t.DLQTopic, m.workers)
	t.Rates = Rates{
		Published:    o.rates.rate("published", m.counter(m.relay, "eventforge_cdc_events_published_total"), t.ReadAt),
		Consumed:     o.rates.rate("consumed", m.counter(m.workers, "eventforge_worker_events_total"), t.ReadAt),
		DeadLettered: o.rates.rate("dlq", m.counter(m.workers, "eventforge_worker_events_total", `result="dlq"`), t.ReadAt),
	}
	t.Rebalances = m.counter(m.workers, "eventforge_worker_rebalances_total")
	t.AssignmentChanges, t.ChangedAt = o.assign.see(t.Members, t.ReadAt)
	return t
}

func (o *observer) slotView(ctx context.Context, fail func(string, error)) SlotView {
	s := SlotView{Name: o.t.slot}
	var lag, retained int64
	err := o.pool.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn::text, ''), active,
		  coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
		  coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, o.t.slot).Scan(&s.ConfirmedLSN, &s.Active, &lag, &retained)
	if err != nil {
		fail("read slot "+o.t.slot, err)
		return s
	}
	s.LagBytes, s.RetainedBytes = &lag, &retained
	return s
}

// scraped are the processes' metrics read once per topology.
type scraped struct {
	relayAddrs []string
	relayByIdx [][]sample // per relay address; nil: unreachable
	relay      [][]sample // the relays that answered
	workers    [][]sample
}

func (o *observer) scrapeAll(ctx context.Context) scraped {
	s := scraped{relayAddrs: o.t.relays()}
	for _, a := range s.relayAddrs {
		ms, err := scrape(ctx, a)
		if err != nil {
			ms = nil
		} else {
			s.relay = append(s.relay, ms)
		}
		s.relayByIdx = append(s.relayByIdx, ms)
	}
	for _, a := range o.t.workerMetrics() {
		if ms, err := scrape(ctx, a); err == nil {
			s.workers = append(s.workers, ms)
		}
	}
	return s
}

// counter sums name over every scraped process of procs; nil when none answered.
func (scraped) counter(procs [][]sample, name string, want ...string) *float64 {
	if len(procs) == 0 {
		return nil
	}
	var t float64
	for _, ms := range procs {
		t += sum(ms, name, want...)
	}
	return &t
}

// relayViews are the demo's relay states, or one per relay metrics address
// (the active relay and its standbys): the state its metrics give
// (streaming, standby, both 0: reconnecting; no answer: unreachable).
func relayViews(demo []RelayView, s scraped) []RelayView {
	if demo != nil {
		return demo
	}
	if len(s.relayAddrs) == 0 {
		return []RelayView{{Name: "relay", State: "unknown"}}
	}
	var out []RelayView
	for i, a := range s.relayAddrs {
		v := RelayView{Name: "relay", State: "unreachable"}
		if len(s.relayAddrs) > 1 {
			v.Name = "relay " + a
		}
		if s.relayByIdx[i] != nil {
			v.State = relayState(s.relayByIdx[i])
		}
		out = append(out, v)
	}
	return out
}

func relayState(ms []sample) string {
	switch {
	case sum(ms, "eventforge_cdc_streaming") > 0:
		return "active"
	case sum(ms, "eventforge_cdc_standby") > 0:
		return "standby"
	default:
		return "reconnecting"
	}
}

// partitionViews reads every partition's offsets and the group's members.
func (o *observer) partitionViews(t *Topology) error {
	n, err := o.kafka.partitions(t.Topic)
	if err != nil {
		return err
	}
	members, err := o.kafka.members(t.Group, t.Topic)
	if err != nil {
		t.Errors = append(t.Errors, err.Error())
	}
	t.Members = members
	owner := map[int32]string{}
	for _, m := range members {
		for _, p := range m.Partitions {
			owner[p] = m.Name
		}
	}
	offs, err := o.kafka.offsets(t.Group, t.Topic, n)
	if err != nil {
		return err
	}
	for p := range n {
		pv := offs[p]
		pv.Owner = owner[p]
		t.Partitions = append(t.Partitions, pv)
	}
	return nil
}

// dlqView reads the dead-letter topic's depth (absent topic: none yet) and
// the oldest dead letter's age from the workers.
func (o *observer) dlqView(topic string, workers [][]sample) DLQView {
	var d DLQView
	if n, err := o.kafka.partitions(topic); err == nil {
		d.Exists = true
		d.Depth, _ = o.kafka.depth(topic, n) // unreadable: shown as 0
	}
	if len(workers) > 0 {
		var age float64
		for _, ms := range workers {
			age = max(age, maxOf(ms, "eventforge_worker_dlq_oldest_age_seconds"))
		}
		d.OldestAgeSeconds = &age
	}
	return d
}

// members are the group's members with their partitions of topic, named
// "member 1", … in member id order.
func (k *kafkaReader) members(group, topic string) ([]MemberView, error) {
	descs, err := k.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	var out []MemberView
	for _, d := range descs {
		for id, m := range d.Members {
			mv := MemberView{ID: id, ClientID: m.ClientId, Host: strings.TrimPrefix(m.ClientHost, "/")}
			if a, err := m.GetMemberAssignment(); err == nil && a != nil {
				mv.Partitions = slices.Sorted(slices.Values(a.Topics[topic]))
			}
			out = append(out, mv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	for i := range out {
		out[i].Name = fmt.Sprintf("member %d", i+1)
	}
	return out, nil
}

// offsets reads each partition's high watermark and the group's committed
// offset; the lag counts from the oldest offset when nothing is committed.
func (k *kafkaReader) offsets(group, topic string, n int32) ([]PartitionView, error) {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	resp, err := k.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		return nil, fmt.Errorf("read committed offsets: %w", err)
	}
	hwm, err := k.listOffsets(topic, ps, sarama.OffsetNewest)
	if err != nil {
		return nil, fmt.Errorf("read high watermarks: %w", err)
	}
	oldest, err := k.listOffsets(topic, ps, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("read oldest offsets: %w", err)
	}
	out := make([]PartitionView, n)
	for _, p := range ps {
		pv := PartitionView{Partition: p, HighWatermark: hwm[p], Committed: -1}
		if b := resp.GetBlock(topic, p); b != nil {
			pv.Committed = b.Offset
		}
		from := pv.Committed
		if from < 0 {
			from = oldest[p]
		}
		pv.Lag = max(0, pv.HighWatermark-from)
		out[p] = pv
	}
	return out, nil
}

// depth is the number of records the topic's partitions hold.
func (k *kafkaReader) depth(topic string, n int32) (int64, error) {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	hwm, err := k.listOffsets(topic, ps, sarama.OffsetNewest)
	if err != nil {
		return 0, err
	}
	oldest, err := k.listOffsets(topic, ps, sarama.OffsetOldest)
	if err != nil {
		return 0, err
	}
	var d int64
	for _, p := range ps {
		d += max(0, hwm[p]-oldest[p])
	}
	return d, nil
}

// listOffsets reads the offset at ts (sarama.OffsetNewest or OffsetOldest)
// of each partition with one request per partition leader, so a refresh
// every second stays cheap on topics with many partitions.
func (k *kafkaReader) listOffsets(topic string, ps []int32, ts int64) (map[int32]int64, error) {
	brokers := map[int32]*sarama.Broker{}
	reqs := map[int32]*sarama.OffsetRequest{}
	for _, p := range ps {
		b, err := k.client.Leader(topic, p)
		if err != nil {
			return nil, fmt.Errorf("leader of %s/%d: %w", topic, p, err)
		}
		if reqs[b.ID()] == nil {
			brokers[b.ID()], reqs[b.ID()] = b, sarama.NewOffsetRequest(k.client.Config().Version)
		}
		reqs[b.ID()].AddBlock(topic, p, ts, 1)
	}
	out := make(map[int32]int64, len(ps))
	for id, req := range reqs {
		resp, err := brokers[id].GetAvailableOffsets(req)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			blk := resp.GetBlock(topic, p)
			if blk == nil {
				continue
			}
			if !errors.Is(blk.Err, sarama.ErrNoError) {
				return nil, fmt.Errorf("offset of %s/%d: %w", topic, p, blk.Err)
			}
			if len(blk.Offsets) == 1 {
				out[p] = blk.Offsets[0]
			}
		}
	}
	if len(out) != len(ps) {
		return nil, fmt.Errorf("offsets of %s: %d of %d partitions answered", topic, len(out), len(ps))
	}
	return out, nil
}

// TailRecord is one of a partition's last records.
type TailRecord struct {
	Offset    int64     `json:"offset"`
	Key       string    `json:"key"`
	EventID   string    `json:"event_id"`
	Timestamp time.Time `json:"timestamp"`
}

// tailSize is how many of a partition's last records the page shows.
const tailSize = 10

// tail reads partition p's last n records, newest first.
func (k *kafkaReader) tail(topic string, p int32, n int64) ([]TailRecord, error) {
	var out []TailRecord
	err := k.read(time.Now().Add(lookupTimeout), topic, p, func(oldest, hwm int64) int64 { return max(oldest, hwm-n) },
		func(m *sarama.ConsumerMessage) {
			r := TailRecord{Offset: m.Offset, Key: string(m.Key), Timestamp: m.Timestamp}
			for _, h := range m.Headers {
				if string(h.Key) == "event_id" {
					r.EventID = string(h.Value)
				}
			}
			out = append(out, r)
		})
	slices.Reverse(out)
	return out, err
}

package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// Diagram node names a step can mark as where the event is now: the API,
// the orders/outbox tables, the slot, the relay, the order's partition,
// the consumer group member owning it, processed_events and the DLQ topic.
const (
	nodeAPI       = "api"
	nodeTables    = "tables"
	nodeSlot      = "slot"
	nodeRelay     = "relay"
	nodePartition = "partition"
	nodeWorker    = "worker"
	nodeInbox     = "inbox"
	nodeDLQ       = "dlq"
)

// stepNodes is, for each scenario, the diagram node each step shows the
// event at (in step order).
var stepNodes = map[string][]string{
	"journey":              {nodeAPI, nodeTables, nodeTables, nodeRelay, nodePartition, nodeSlot, nodeWorker, nodeInbox, nodeInbox, nodeWorker},
	"rollback":             {nodeAPI, nodeTables, nodeTables, nodeSlot},
	"relay-crash":          {nodeRelay, nodeAPI, nodeRelay, nodePartition, nodeInbox},
	"worker-crash":         {nodeWorker, nodeAPI, nodeWorker, nodeInbox},
	"concurrent-duplicate": {nodeWorker, nodeAPI, nodeInbox, nodeInbox, nodeWorker},
	"dead-letter":          {nodeTables, nodeWorker, nodeDLQ, nodePartition, nodeInbox},
}

// stepNode is the node step i (from 0) of the scenario marks ("" unknown).
func stepNode(scenario string, i int) string {
	ns := stepNodes[scenario]
	if i < 0 || i >= len(ns) {
		return ""
	}
	return ns[i]
}

// Topology reads the pipeline's architecture now. In demo mode a stopped
// relay process shows as stopped; otherwise the relay's metrics tell.
func (c *Console) Topology(ctx context.Context) Topology {
	var relays []RelayView
	if c.demo != nil && !c.demo.relay.running() {
		relays = []RelayView{{Name: "relay", State: "stopped"}}
	}
	return c.obs.topology(ctx, relays)
}

// serveTopology is GET /api/topology: what the diagram draws.
func (c *Console) serveTopology(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.Topology(r.Context()))
}

// servePartition is GET /api/partition?p=N: the partition's last records,
// newest first.
func (c *Console) servePartition(w http.ResponseWriter, r *http.Request) {
	p, err := strconv.ParseInt(r.URL.Query().Get("p"), 10, 32)
	if err != nil || p < 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want ?p=<partition number>"})
		return
	}
	n, err := c.obs.kafka.partitions(c.obs.t.topic)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	if int32(p) >= n {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such partition"})
		return
	}
	recs, err := c.obs.kafka.tail(c.obs.t.topic, int32(p), tailSize)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	if recs == nil {
		recs = []TailRecord{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": c.obs.t.topic, "partition": p, "records": recs})
}

// Where says in words where the diagram shows the event at this step (the
// text equivalent of the diagram's marked node, for the page without scripts).
func (s Snapshot) Where() string {
	p := fmt.Sprintf("p%d", s.Facts.Partition)
	switch s.Node {
	case nodeAPI:
		return "the API, with the client's request"
	case nodeTables:
		return "PostgreSQL, the orders and outbox tables"
	case nodeSlot:
		return "the replication slot"
	case nodeRelay:
		return "the relay"
	case nodePartition:
		return fmt.Sprintf("partition %s of %d (murmur2 of the key %s)", p, s.Facts.Partitions, s.Facts.OrderID)
	case nodeWorker:
		return "the consumer group member that owns partition " + p
	case nodeInbox:
		return "processed_events, the inbox"
	case nodeDLQ:
		return "the dead-letter topic"
	}
	return "unknown"
}

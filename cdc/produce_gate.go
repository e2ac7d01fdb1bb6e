package cdc

// keyGate keeps at most one unacknowledged record per key (topic and record
// key) in the producer's hands. When the broker refuses a record
// permanently, sarama bumps the producer epoch and sends the partition's
// next batch at once: a later record of the same key would land before the
// failed one is sent again, breaking per-key order. Behind the gate, the
// later record is not in sarama yet: it waits until the earlier one is
// delivered or set aside, and an error can be retried in place.
//
// The gate is per key, not per partition, because sarama may split records
// handed over together into several requests: only a key's records never
// being in flight together keeps their order whatever the producer does
// after an error. Records of different keys go out together, so batches
// still fill under load; a key's own records take one round trip each.
//
// Not safe for concurrent use: the dispatch loop owns it.
type keyGate struct {
	waiting map[string][]*pending // key in flight -> its records queued behind it
	ready   []*pending            // released, to hand to the producer in order
}

func newKeyGate() *keyGate { return &keyGate{waiting: map[string][]*pending{}} }

// admit queues p behind its key's record in flight, or releases it.
func (g *keyGate) admit(p *pending) {
	if q, busy := g.waiting[p.key]; busy {
		g.waiting[p.key] = append(q, p)
		return
	}
	g.waiting[p.key] = nil
	g.ready = append(g.ready, p)
}

// next is the first released record, or nil.
func (g *keyGate) next() *pending {
	if len(g.ready) == 0 {
		return nil
	}
	return g.ready[0]
}

// sent drops the record next returned: the producer has it.
func (g *keyGate) sent() {
	g.ready[0] = nil
	g.ready = g.ready[1:]
}

// resend releases p again (its key stays busy): a retry in place.
func (g *keyGate) resend(p *pending) { g.ready = append(g.ready, p) }

// settled frees p's key: its next queued record, if any, is released.
func (g *keyGate) settled(p *pending) {
	q := g.waiting[p.key]
	if len(q) == 0 {
		delete(g.waiting, p.key)
		return
	}
	g.ready = append(g.ready, q[0])
	q[0] = nil
	g.waiting[p.key] = q[1:]
}

// busy reports how many keys have a record in flight or released.
func (g *keyGate) busy() int { return len(g.waiting) }

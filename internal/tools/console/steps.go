package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// stepFunc performs a step's real action and returns what it saw.
type stepFunc func(ctx context.Context, r *run) ([]string, error)

// sendOrder posts the order to the API, holding the commit gate (and the
// business-change gate) first when asked. Without a held commit it waits for
// the API's answer.
func sendOrder(holdCommit, holdEffect bool) stepFunc {
	return func(ctx context.Context, r *run) ([]string, error) {
		if holdEffect {
			if err := r.d.hold(ctx, gateEffect); err != nil {
				return nil, err
			}
		}
		if holdCommit {
			if err := r.d.hold(ctx, gateCommit); err != nil {
				return nil, err
			}
		}
		var err error
		if r.walFrom, err = r.obs.walPosition(ctx); err != nil {
			return nil, err
		}
		r.baseline = r.obs.signals(ctx)
		r.postOrder()
		ev := []string{fmt.Sprintf(`POST http://%s/orders {"id":%q,"customer":"console","amount":4200,"currency":"EUR"}`, r.d.apiAddr, r.orderID)}
		if holdCommit {
			return append(ev, "the console holds the API's COMMIT at a gate (an advisory lock its demo trigger waits for)"), nil
		}
		a, err := r.created(ctx)
		if err != nil {
			return nil, err
		}
		return append(ev, fmt.Sprintf("API answered %d %s", a.status, a.body)), nil
	}
}

func eventIDOf(body string) string {
	var v struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return v.EventID
}

// waitAtGate waits until a transaction waits at the gate and remembers its backend.
func (r *run) waitAtGate(ctx context.Context, key int64, what string) (backend, error) {
	var w []backend
	err := until(ctx, what, func(ctx context.Context) (bool, error) {
		var err error
		w, err = r.gateWaiters(ctx, key)
		return len(w) > 0, err
	})
	if err != nil {
		return backend{}, err
	}
	r.waiter = w[0].pid
	return w[0], nil
}

func waitInTransaction(ctx context.Context, r *run) ([]string, error) {
	w, err := r.waitAtGate(ctx, gateCommit, "the API's transaction waits to commit")
	if err != nil {
		return nil, err
	}
	tables, err := r.writeLocks(ctx, r.waiter)
	if err != nil {
		return nil, err
	}
	o, ob, err := r.visibleRows(ctx)
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("API backend pid %d, transaction xid %s, has written to: %s", r.waiter, w.xid, tables),
		"its COMMIT waits at the console's gate",
		fmt.Sprintf("rows another session sees: orders %d, outbox %d", o, ob),
	}, nil
}

func commitOrder(ctx context.Context, r *run) ([]string, error) {
	if err := r.d.release(ctx, gateCommit); err != nil {
		return nil, err
	}
	a, err := r.created(ctx)
	if err != nil {
		return nil, err
	}
	o, ob, err := r.visibleRows(ctx)
	if err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("API answered %d %s", a.status, a.body), fmt.Sprintf("rows another session sees: orders %d, outbox %d", o, ob)}, nil
}

func rollBack(ctx context.Context, r *run) ([]string, error) {
	if _, err := r.obs.pool.Exec(ctx, "SELECT pg_cancel_backend($1)", r.waiter); err != nil {
		return nil, fmt.Errorf("cancel the API's transaction: %w", err)
	}
	a, err := r.answer(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.d.release(ctx, gateCommit); err != nil {
		return nil, err
	}
	o, ob, err := r.visibleRows(ctx)
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("pg_cancel_backend(%d): the transaction waiting to commit was rolled back", r.waiter),
		fmt.Sprintf("API answered %d %s", a.status, a.body),
		fmt.Sprintf("rows another session sees: orders %d, outbox %d", o, ob),
	}, nil
}

func relaySawNothing(ctx context.Context, r *run) ([]string, error) {
	lsn, err := r.obs.walPosition(ctx)
	if err != nil {
		return nil, err
	}
	c, err := r.waitConfirmed(ctx, lsn)
	if err != nil {
		return nil, err
	}
	f, err := r.obs.facts(ctx, r.orderID, r.walFrom)
	if err != nil {
		return nil, err
	}
	recs, err := r.obs.kafka.findKey(time.Now().Add(lookupTimeout), r.obs.t.topic, f.Partition, r.orderID)
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("slot confirmed_flush_lsn %s is past %s, the WAL position after the rollback", c, lsn),
		fmt.Sprintf("records with key %s in %s partition %d: %d", r.orderID, r.obs.t.topic, f.Partition, len(recs)),
	}, nil
}

// waitConfirmed waits until the slot is confirmed at or past lsn and
// returns its confirmed position.
func (r *run) waitConfirmed(ctx context.Context, lsn string) (string, error) {
	var c string
	err := until(ctx, "the slot is confirmed past "+lsn, func(ctx context.Context) (bool, error) {
		ok, got, err := r.obs.confirmedPast(ctx, lsn)
		c = got
		return ok, err
	})
	return c, err
}

// commitFacts reads the facts and insists that the order's commit record was found.
func (r *run) commitFacts(ctx context.Context) (Facts, error) {
	var f Facts
	err := until(ctx, "the commit record is found", func(ctx context.Context) (bool, error) {
		var err error
		f, err = r.obs.facts(ctx, r.orderID, r.walFrom)
		return f.CommitEndLSN != "", err
	})
	return f, err
}

func relayReceived(ctx context.Context, r *run) ([]string, error) {
	f, err := r.commitFacts(ctx)
	if err != nil {
		return nil, err
	}
	commit, _ := parseLSN(f.CommitLSN)
	var got float64
	err = until(ctx, "the relay received the commit", func(ctx context.Context) (bool, error) {
		ms, err := scrape(ctx, r.d.relayAddr)
		got = maxOf(ms, "eventforge_cdc_received_lsn")
		return uint64(got) >= commit, err
	})
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("commit record of the transaction at %s (pg_walinspect)", f.CommitLSN),
		fmt.Sprintf("relay's eventforge_cdc_received_lsn = %s, at or past it", formatLSN(uint64(got))),
	}, nil
}

func published(ctx context.Context, r *run) ([]string, error) {
	f, err := r.waitFacts(ctx, "the record is in Kafka", func(f Facts) bool { return len(f.Records) > 0 })
	if err != nil {
		return nil, err
	}
	rec := f.Records[0]
	return []string{
		fmt.Sprintf("key %q → murmur2 → partition %d of %d (the Java client's partitioner)", r.orderID, f.Partition, f.Partitions),
		fmt.Sprintf("record found in %s partition %d at offset %d, header event_id=%s", r.obs.t.topic, rec.Partition, rec.Offset, rec.Headers["event_id"]),
	}, nil
}

func confirmed(ctx context.Context, r *run) ([]string, error) {
	f, err := r.commitFacts(ctx)
	if err != nil {
		return nil, err
	}
	c, err := r.waitConfirmed(ctx, f.CommitEndLSN)
	if err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("slot %s confirmed_flush_lsn = %s, past the transaction's end %s", r.obs.t.slot, c, f.CommitEndLSN)}, nil
}

// waitFacts polls the facts until ok accepts them.
func (r *run) waitFacts(ctx context.Context, what string, ok func(Facts) bool) (Facts, error) {
	var f Facts
	err := until(ctx, what, func(ctx context.Context) (bool, error) {
		var err error
		f, err = r.obs.facts(ctx, r.orderID, r.walFrom)
		return err == nil && ok(f), err
	})
	return f, err
}

func workerReceived(ctx context.Context, r *run) ([]string, error) {
	w, err := r.waitAtGate(ctx, gateEffect, "a worker's transaction waits at the gate")
	if err != nil {
		return nil, err
	}
	f, err := r.obs.facts(ctx, r.orderID, r.walFrom)
	if err != nil {
		return nil, err
	}
	ev := []string{fmt.Sprintf("the record's partition: %d of %d", f.Partition, f.Partitions)}
	as, err := r.obs.kafka.assignments(r.obs.t.group, r.obs.t.topic)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(as))
	for id := range as {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		owner := ""
		if slices.Contains(as[id], f.Partition) {
			owner = " ← owns the record's partition"
		}
		ev = append(ev, fmt.Sprintf("group member %s holds partitions %v%s", shortID(id), as[id], owner))
	}
	return append(ev, fmt.Sprintf("%s's transaction started (backend pid %d, application_name %s)", w.app, r.waiter, w.app)), nil
}

// shortID shortens a Kafka member id (client id and a UUID) for the page.
func shortID(id string) string {
	if len(id) > 26 {
		return id[:26] + "…"
	}
	return id
}

func inboxWritten(ctx context.Context, r *run) ([]string, error) {
	tables, err := r.writeLocks(ctx, r.waiter)
	if err != nil {
		return nil, err
	}
	var xid string
	_ = r.obs.pool.QueryRow(ctx, "SELECT coalesce(backend_xid::text, '') FROM pg_stat_activity WHERE pid = $1", r.waiter).Scan(&xid)
	f, err := r.obs.facts(ctx, r.orderID, r.walFrom)
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("worker transaction xid %s (backend pid %d) has written to: %s", xid, r.waiter, tables),
		"its UPDATE of the order waits at the console's gate",
		fmt.Sprintf("inbox rows another session sees: %d (uncommitted)", f.InboxRows),
	}, nil
}

func effectCommitted(ctx context.Context, r *run) ([]string, error) {
	if err := r.d.release(ctx, gateEffect); err != nil {
		return nil, err
	}
	f, err := r.waitFacts(ctx, "the order is processed", func(f Facts) bool { return f.Status == "processed" && f.InboxRows == 1 })
	if err != nil {
		return nil, err
	}
	r.pinned = &f // the offset as read with the commit, not a moment later
	return []string{
		fmt.Sprintf("order status %s, inbox rows %d, business changes %d, committed in one transaction", f.Status, f.InboxRows, f.Effects),
		fmt.Sprintf("group offset of partition %d right after the commit: %d (the worker commits offsets every 2 s)", f.Partition, f.Committed),
	}, nil
}

func offsetCommitted(ctx context.Context, r *run) ([]string, error) {
	f, err := r.waitFacts(ctx, "the offset is committed", offsetPast)
	if err != nil {
		return nil, err
	}
	last := f.Records[len(f.Records)-1]
	return []string{fmt.Sprintf("group %s committed offset %d on partition %d, past the record at %d", r.obs.t.group, f.Committed, f.Partition, last.Offset)}, nil
}

func offsetPast(f Facts) bool {
	return len(f.Records) > 0 && f.Committed > f.Records[len(f.Records)-1].Offset
}

func armRelay(ctx context.Context, r *run) ([]string, error) {
	r.d.relay.stop(10 * time.Second)
	const fp = "cdc/after-ack-before-confirm=crash"
	if err := r.d.relay.start(fp); err != nil {
		return nil, err
	}
	if err := r.d.relay.waitReady(ctx); err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("relay restarted (pid %d) with EVENTFORGE_FAILPOINTS=%s", r.d.relay.status().PID, fp)}, nil
}

func relayDied(ctx context.Context, r *run) ([]string, error) {
	if err := r.d.relay.waitExit(ctx); err != nil {
		return nil, err
	}
	f, err := r.commitFacts(ctx)
	if err != nil {
		return nil, err
	}
	ok, c, err := r.obs.confirmedPast(ctx, f.CommitEndLSN)
	if err != nil {
		return nil, err
	}
	if ok {
		return nil, fmt.Errorf("slot confirmed %s past the transaction's end %s: the failpoint did not fire before confirming", c, f.CommitEndLSN)
	}
	return []string{
		fmt.Sprintf("relay exited; its log: %q", firstLine(r.d.relay.logContains, "failpoint cdc/after-ack-before-confirm")),
		fmt.Sprintf("records with the event id in partition %d: %d", f.Partition, len(f.Records)),
		fmt.Sprintf("slot confirmed_flush_lsn %s is still before the transaction's end %s", c, f.CommitEndLSN),
	}, nil
}

func firstLine(contains func(string) bool, s string) string {
	if contains(s) {
		return "eventforge: " + s + ": crash"
	}
	return "(no failpoint line)"
}

func relayRepublished(ctx context.Context, r *run) ([]string, error) {
	if err := r.d.relay.start(""); err != nil {
		return nil, err
	}
	f, err := r.waitFacts(ctx, "the event is published again", func(f Facts) bool { return len(f.Records) >= 2 })
	if err != nil {
		return nil, err
	}
	c, err := r.waitConfirmed(ctx, f.CommitEndLSN)
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("relay restarted without failpoints (pid %d)", r.d.relay.status().PID),
		fmt.Sprintf("records with event_id %s in partition %d: offsets %d and %d", f.EventID, f.Partition, f.Records[0].Offset, f.Records[1].Offset),
		fmt.Sprintf("slot confirmed_flush_lsn %s, now past the transaction", c),
	}, nil
}

func duplicateDropped(ctx context.Context, r *run) ([]string, error) {
	return r.settled(ctx, r.obs.t.group)
}

// settled waits until the order is processed, the groups committed past
// every copy and the workers counted a duplicate more than at the start.
func (r *run) settled(ctx context.Context, groups ...string) ([]string, error) {
	f, err := r.waitFacts(ctx, "the order is processed and the offset committed", func(f Facts) bool {
		return f.Status == "processed" && offsetPast(f)
	})
	if err != nil {
		return nil, err
	}
	last := f.Records[len(f.Records)-1].Offset
	for _, g := range groups[1:] {
		err := until(ctx, "group "+g+" committed", func(ctx context.Context) (bool, error) {
			c, err := r.obs.kafka.committed(g, r.obs.t.topic, f.Partition)
			return c > last, err
		})
		if err != nil {
			return nil, err
		}
	}
	var dup float64
	err = until(ctx, "a worker drops a duplicate", func(ctx context.Context) (bool, error) {
		s := r.obs.signals(ctx)
		if s.Duplicates == nil {
			return false, nil
		}
		dup = *s.Duplicates
		return dup > deref(r.baseline.Duplicates) || r.restartedWorkers(), nil
	})
	if err != nil {
		return nil, err
	}
	if f, err = r.obs.facts(ctx, r.orderID, r.walFrom); err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("records with the event id: %d; processed_events rows: %d; business changes: %d", len(f.Records), f.InboxRows, f.Effects),
		fmt.Sprintf("duplicates dropped by the inbox (workers' eventforge_worker_events_total{result=\"duplicate\"}): %.0f", dup),
		fmt.Sprintf("committed offsets of %s past offset %d", strings.Join(groups, " and "), last),
	}, nil
}

// restartedWorkers reports whether a worker restarted during the run (its
// counters started again from zero, so the baseline does not apply).
func (r *run) restartedWorkers() bool { return r.sc.name == "worker-crash" }

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func armWorker(ctx context.Context, r *run) ([]string, error) {
	var wg sync.WaitGroup
	for _, w := range r.d.workers {
		wg.Go(func() { w.stop(10 * time.Second) })
	}
	wg.Wait()
	const fp = "worker/after-commit-before-offset=crash"
	w := r.d.workers[0]
	if err := w.start(fp); err != nil {
		return nil, err
	}
	if err := w.waitReady(ctx); err != nil {
		return nil, err
	}
	return []string{
		"worker-1 and worker-2 stopped (SIGTERM: they committed their offsets and left the group)",
		fmt.Sprintf("worker-1 restarted (pid %d) with EVENTFORGE_FAILPOINTS=%s; it owns every partition", w.status().PID, fp),
	}, nil
}

func workerDied(ctx context.Context, r *run) ([]string, error) {
	w := r.d.workers[0]
	if err := w.waitExit(ctx); err != nil {
		return nil, err
	}
	f, err := r.obs.facts(ctx, r.orderID, r.walFrom)
	if err != nil {
		return nil, err
	}
	if offsetPast(f) {
		return nil, fmt.Errorf("offset %d committed past the record: the failpoint did not fire first", f.Committed)
	}
	return []string{
		fmt.Sprintf("worker-1 exited; its log: %q", firstLine(w.logContains, "failpoint worker/after-commit-before-offset")),
		fmt.Sprintf("committed: order %s, processed_events rows %d, business changes %d", f.Status, f.InboxRows, f.Effects),
		fmt.Sprintf("group offset of partition %d: %d, not past the record", f.Partition, f.Committed),
	}, nil
}

func redelivered(ctx context.Context, r *run) ([]string, error) {
	for _, w := range r.d.workers {
		if err := w.start(""); err != nil {
			return nil, err
		}
	}
	ev := []string{"worker-1 and worker-2 restarted without failpoints; the group waits for the killed member's session to expire, then rebalances"}
	more, err := r.settled(ctx, r.obs.t.group)
	return append(ev, more...), err
}

func armTwin(ctx context.Context, r *run) ([]string, error) {
	if err := r.d.hold(ctx, gateEffect); err != nil {
		return nil, err
	}
	if err := r.d.twin.start(""); err != nil {
		return nil, err
	}
	if err := r.d.twin.waitReady(ctx); err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("worker-twin (pid %d) in group %s-twin, inbox consumer name %s (the same as the group's workers)", r.d.twin.status().PID, r.d.group, r.d.group),
		"the console holds the business change at a gate",
	}, nil
}

func bothApplying(ctx context.Context, r *run) ([]string, error) {
	var held, waiting []backend
	err := until(ctx, "two transactions apply the event", func(ctx context.Context) (bool, error) {
		var err error
		if held, err = r.gateWaiters(ctx, gateEffect); err != nil {
			return false, err
		}
		waiting, err = r.uniqueWaiters(ctx)
		return len(held) > 0 && len(waiting) > 0, err
	})
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("backend pid %d (xid %s) inserted the inbox row and waits at the gate", held[0].pid, held[0].xid),
		fmt.Sprintf("backend pid %d waits for transaction %s: it inserts the same (consumer, event_id)", waiting[0].pid, held[0].xid),
	}, nil
}

func oneEffect(ctx context.Context, r *run) ([]string, error) {
	if err := r.d.release(ctx, gateEffect); err != nil {
		return nil, err
	}
	return r.settled(ctx, r.obs.t.group, r.d.group+"-twin")
}

func stopTwin(ctx context.Context, r *run) ([]string, error) {
	r.d.twin.stop(10 * time.Second)
	return []string{"worker-twin stopped"}, nil
}

func eventWithoutOrder(ctx context.Context, r *run) ([]string, error) {
	var err error
	if r.walFrom, err = r.obs.walPosition(ctx); err != nil {
		return nil, err
	}
	r.baseline = r.obs.signals(ctx)
	err = r.obs.pool.QueryRow(ctx, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'orders', $1, 'order.created', jsonb_build_object('id', $1::text)) RETURNING event_id::text`, r.orderID).Scan(&r.eventID)
	if err != nil {
		return nil, fmt.Errorf("insert the outbox row: %w", err)
	}
	return []string{fmt.Sprintf("INSERT INTO outbox (…) VALUES ('%s', 'orders', '%s', 'order.created', …) committed; no orders row", r.eventID, r.orderID)}, nil
}

func retried(ctx context.Context, r *run) ([]string, error) {
	var n float64
	err := until(ctx, "the worker retries", func(ctx context.Context) (bool, error) {
		n = deref(r.obs.signals(ctx).Retries)
		return n > deref(r.baseline.Retries), nil
	})
	if err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("workers' eventforge_worker_retries_total = %.0f (was %.0f)", n, deref(r.baseline.Retries)),
		"the handler's UPDATE orders … WHERE id = $1 affected 0 rows, fewer than expect_rows 1"}, nil
}

func deadLettered(ctx context.Context, r *run) ([]string, error) {
	f, err := r.waitFacts(ctx, "the dead letter is written and the offset committed", func(f Facts) bool {
		return len(f.DeadLetters) > 0 && offsetPast(f)
	})
	if err != nil {
		return nil, err
	}
	dl := f.DeadLetters[0]
	return []string{
		fmt.Sprintf("dead letter in %s.dlq partition %d offset %d: x-eventforge-attempts=%s, x-eventforge-error=%q",
			r.obs.t.topic, dl.Partition, dl.Offset, dl.Headers["x-eventforge-attempts"], dl.Headers["x-eventforge-error"]),
		fmt.Sprintf("group offset of partition %d: %d, past the record", f.Partition, f.Committed),
	}, nil
}

func replayed(ctx context.Context, r *run) ([]string, error) {
	if _, err := r.obs.pool.Exec(ctx, `INSERT INTO orders (id, status, customer, amount, currency) VALUES ($1, 'created', 'console', 4200, 'EUR')`, r.orderID); err != nil {
		return nil, fmt.Errorf("create the missing order: %w", err)
	}
	cmd := exec.CommandContext(ctx, r.d.cfg.Bin, "dlq", "replay", "--kafka-brokers", r.d.cfg.brokerList(),
		"--topic", r.obs.t.topic+outbox.DLQSuffix, "--event-id", r.eventID)
	cmd.Env = childEnv("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("dlq replay: %w: %s", err, out)
	}
	ev := []string{fmt.Sprintf("INSERT INTO orders (id, status, …) VALUES ('%s', 'created', …)", r.orderID),
		fmt.Sprintf("eventforge dlq replay --topic %s.dlq --event-id %s:", r.obs.t.topic, r.eventID)}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ev = append(ev, "  "+l)
	}
	return ev, nil
}

func appliedAfterReplay(ctx context.Context, r *run) ([]string, error) {
	f, err := r.waitFacts(ctx, "the replayed event is applied", func(f Facts) bool {
		return f.Status == "processed" && f.InboxRows == 1 && offsetPast(f)
	})
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("order %s, processed_events rows for event %s: %d, business changes: %d", f.Status, f.EventID, f.InboxRows, f.Effects),
		fmt.Sprintf("records with the event id in the topic: %d (the original and the replay); dead letters: %d", len(f.Records), len(f.DeadLetters)),
	}, nil
}

// parseLSN reads a PostgreSQL LSN "X/Y".
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("invalid LSN %q", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid LSN %q", s)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid LSN %q", s)
	}
	return h<<32 | l, nil
}

func formatLSN(v uint64) string { return fmt.Sprintf("%X/%X", v>>32, uint32(v)) }

// created waits for the API's answer to the order, which must be 201
// Created, and keeps the event id it names.
func (r *run) created(ctx context.Context) (apiAnswer, error) {
	a, err := r.answer(ctx)
	if err != nil {
		return a, err
	}
	if a.status != 201 {
		return a, fmt.Errorf("API answered %d %s", a.status, a.body)
	}
	r.eventID = eventIDOf(a.body)
	return a, nil
}

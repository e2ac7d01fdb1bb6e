package console

// scenario is a story told with real steps.
type scenario struct {
	name, title, summary string
	steps                []step
	// outcome explains what the durable rows and offsets show at the end.
	outcome string
}

// step is one step of a scenario: its real action waits until the system
// reached the state the step explains, and returns the evidence it saw.
type step struct {
	title, explain string
	do             stepFunc
}

// scenarios lists every scenario in the order the page offers them.
func scenarios() []*scenario {
	return []*scenario{journey(), rollbackScenario(), relayCrash(), workerCrash(), concurrentDuplicate(), deadLetter()}
}

// ScenarioView is a scenario as the templates render it.
type ScenarioView struct {
	Name, Title, Summary, Outcome string
	Steps                         []StepView
}

func (s *scenario) view() ScenarioView {
	v := ScenarioView{Name: s.name, Title: s.title, Summary: s.summary, Outcome: s.outcome}
	for _, st := range s.steps {
		v.Steps = append(v.Steps, StepView{Title: st.title, Explain: st.explain})
	}
	return v
}

func scenarioViews() []ScenarioView {
	var out []ScenarioView
	for _, s := range scenarios() {
		out = append(out, s.view())
	}
	return out
}

func findScenario(name string) *scenario {
	for _, s := range scenarios() {
		if s.name == name {
			return s
		}
	}
	return nil
}

func journey() *scenario {
	return &scenario{
		name: "journey", title: "One order's journey",
		summary: "An order goes through the API, the outbox, the relay, Kafka and a worker. The console pauses the real processes at two gates so each state can be seen.",
		steps: []step{
			{"The client sends an order", "A client POSTs the order to the API. Nothing exists yet: the cards read the database and Kafka and find nothing.", sendOrder(true, true)},
			{"The API writes the order and its outbox event in one transaction", "The API opens a transaction and inserts the orders row and the outbox row. Nothing is committed: another session still sees neither row. The console holds the COMMIT at a gate so you can see this.", waitInTransaction},
			{"Commit saves both rows", "COMMIT makes both rows durable and visible at once, with one commit record in the WAL. (A rollback would leave neither, and the relay would see nothing: see the rollback scenario.)", commitOrder},
			{"The relay reads the committed event from the slot", "The relay streams the WAL through its logical replication slot. Only committed transactions come out of the slot, in commit order.", relayReceived},
			{"It publishes with the order id as key", "The record's key is the order id; murmur2 of the key picks the partition, as Java producers do, so every event of one order lands in one partition, in order.", published},
			{"After the broker's ack the slot's confirmed position moves past it", "Only once the broker acknowledged the record does the relay confirm the transaction's end to the slot. Before that a crash means the event is read again: a duplicate, never a loss.", confirmed},
			{"The worker that owns that partition receives it", "The consumer group gives each partition to one worker; the others own other partitions. The owner's transaction starts.", workerReceived},
			{"The handler inserts the processed event id, which permits the business change", "In one transaction the worker inserts (consumer, event_id) into processed_events; only a new row lets the handler run the business change. The console holds the change at a gate: the inbox row is written but not committed.", inboxWritten},
			{"Id and order status commit together: one effect, offset not yet committed", "The inbox row and the status change commit in one transaction: one effect. The Kafka offset is committed later, so a crash now means a redelivery that the inbox drops.", effectCommitted},
			{"Only then the consumer commits the offset", "The worker commits the offset after the transaction. The order's journey is over: created once, published at least once, applied once.", offsetCommitted},
		},
		outcome: "The order row is processed, its outbox row has one event id, processed_events has one row for it, the business change happened once, the record sits at the partition its key maps to and the group's committed offset is past it.",
	}
}

func rollbackScenario() *scenario {
	return &scenario{
		name: "rollback", title: "A rolled-back transaction",
		summary: "The API's transaction is rolled back before COMMIT: neither row exists and the relay publishes nothing.",
		steps: []step{
			{"The client sends an order", "The client POSTs the order; the console will hold the API's COMMIT.", sendOrder(true, false)},
			{"The API writes both rows, uncommitted", "Order row and outbox row are written inside the open transaction; no other session sees them.", waitInTransaction},
			{"The transaction rolls back", "The console cancels the API's transaction while it waits to commit (as a failed statement or a lost connection would). PostgreSQL rolls back both rows; the API answers with an error.", rollBack},
			{"The relay sees neither row", "Logical decoding streams only committed transactions: the slot's confirmed position moves past the rollback and nothing with this key reaches Kafka.", relaySawNothing},
		},
		outcome: "No orders row, no outbox row, no record with the order's key in its partition, no inbox row: the slot moved past the rolled-back transaction without publishing anything.",
	}
}

func relayCrash() *scenario {
	return &scenario{
		name: "relay-crash", title: "The relay dies after the broker's ack, before confirming",
		summary: "With the failpoint cdc/after-ack-before-confirm the relay is killed after Kafka acknowledged the record and before the slot was confirmed.",
		steps: []step{
			{"Arm the failpoint", "The relay is restarted with EVENTFORGE_FAILPOINTS=cdc/after-ack-before-confirm=crash.", armRelay},
			{"The client sends an order", "The API commits the order and its outbox event.", sendOrder(false, false)},
			{"Kafka acks, the relay dies before confirming", "The record is in Kafka, but the slot's confirmed position is still before the transaction: PostgreSQL will stream it again.", relayDied},
			{"The restarted relay publishes the event again", "A relay without failpoints resumes from the confirmed position and publishes the same event again: a duplicate with the same event id. Nothing is lost.", relayRepublished},
			{"The inbox drops the duplicate", "The worker receives both copies. The first inserted the inbox row and changed the order; the second finds (consumer, event_id) already there and is dropped without effect.", duplicateDropped},
		},
		outcome: "Two records with one event id in the partition (at-least-once), one processed_events row, one business change, the slot confirmed past the transaction and the group's offset past both copies.",
	}
}

func workerCrash() *scenario {
	return &scenario{
		name: "worker-crash", title: "The worker dies after the commit, before the offset",
		summary: "With the failpoint worker/after-commit-before-offset the worker is killed after its transaction committed and before it committed the offset.",
		steps: []step{
			{"Arm the failpoint", "The group's workers stop; one worker starts with EVENTFORGE_FAILPOINTS=worker/after-commit-before-offset=crash and owns every partition.", armWorker},
			{"The client sends an order", "The API commits the order and its event; the relay publishes it.", sendOrder(false, false)},
			{"The worker commits, then dies before the offset", "The inbox row and the change are committed; the offset is not. Kafka will deliver the record again.", workerDied},
			{"Redelivered: the inbox unique key stops a second effect", "The restarted workers receive the record again. The insert of (consumer, event_id) finds the row: the event is a duplicate, the change does not run again, and the offset is committed.", redelivered},
		},
		outcome: "One processed_events row, one business change, the order processed, and the group's offset committed past the record only after the redelivery.",
	}
}

func concurrentDuplicate() *scenario {
	return &scenario{
		name: "concurrent-duplicate", title: "A duplicate delivered to two workers at once",
		summary: "A second consumer group with the same inbox consumer name stands for a worker that still holds a record its successor also got (a rebalance, a zombie). Both apply it at the same moment.",
		steps: []step{
			{"A twin worker joins", "worker-twin consumes the same topic in its own group, with the same processed_events consumer name. The console holds the business change at a gate.", armTwin},
			{"The client sends an order", "The API commits the order; the relay publishes it once. Both groups receive it.", sendOrder(false, false)},
			{"Both workers apply it at once", "One transaction inserted the inbox row and waits at the gate; the other tries to insert the same (consumer, event_id) and waits for the first: the unique key serialises them.", bothApplying},
			{"One effect", "The first commits. The second's insert then finds the row: a duplicate, dropped without effect. Both groups commit their offsets.", oneEffect},
			{"The twin stops", "worker-twin leaves; the demo is back to its two workers.", stopTwin},
		},
		outcome: "One Kafka record, delivered to two consumers concurrently, one processed_events row, one business change: the inbox's primary key decided.",
	}
}

func deadLetter() *scenario {
	return &scenario{
		name: "dead-letter", title: "Retries exhausted: dead letter, then replay",
		summary: "An event whose order does not exist fails the handler until its attempts are spent; it is dead-lettered, then replayed with the same id once the cause is fixed.",
		steps: []step{
			{"An event for a missing order", "A client writes an order.created event with plain SQL but no order row (a bug). The relay publishes it.", eventWithoutOrder},
			{"The handler fails and is retried", "The UPDATE affects 0 rows, fewer than the handler expects: the transaction rolls back and the worker retries in place (the partition waits).", retried},
			{"Dead letter acked before the offset moves", "After 3 attempts the record goes to <topic>.dlq with the error and the attempt count. Only after the broker acknowledged the dead letter is the offset committed.", deadLettered},
			{"Fix the cause and replay", "The missing order is created, then `eventforge dlq replay --event-id` republishes the dead letter to the original topic with the same event id.", replayed},
			{"Applied with the same id", "The worker applies the replayed event: one inbox row for the original event id, one change.", appliedAfterReplay},
		},
		outcome: "One dead letter (with x-eventforge-attempts and the error), two records of one event id in the topic (the original and the replay), one processed_events row and one business change after the fix.",
	}
}

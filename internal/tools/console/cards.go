package console

import "fmt"

// Card is one of the four state cards of the page.
type Card struct {
	// State is a stable word the page styles and the tests read.
	State string `json:"state"`
	// Label is the card's headline in words.
	Label string `json:"label"`
	// Lines are the real values behind it.
	Lines []string `json:"lines"`
}

// Cards are the four state cards: the order row, its outbox event, the
// business effect and the Kafka offset.
type Cards struct {
	Order  Card `json:"order"`
	Outbox Card `json:"outbox"`
	Effect Card `json:"effect"`
	Offset Card `json:"offset"`
}

// cardsOf turns the facts read from the system into the four cards.
func cardsOf(f Facts) Cards {
	var c Cards
	switch f.Status {
	case "":
		c.Order = Card{State: "not-created", Label: "not created", Lines: []string{"no row in orders with id " + f.OrderID}}
	default:
		c.Order = Card{State: f.Status, Label: f.Status, Lines: []string{"orders.id = " + f.OrderID, "status = " + f.Status}}
	}
	if f.EventID == "" {
		c.Outbox = Card{State: "not-written", Label: "not written", Lines: []string{"no outbox row for this order"}}
	} else {
		lsn := "commit LSN unknown (needs pg_walinspect)"
		if f.CommitLSN != "" {
			lsn = "commit LSN " + f.CommitLSN + " (ends " + f.CommitEndLSN + ")"
		}
		c.Outbox = Card{State: "written", Label: "written", Lines: []string{"event_id " + f.EventID, lsn}}
	}
	c.Effect = effectCard(f)
	c.Offset = offsetCard(f)
	return c
}

func effectCard(f Facts) Card {
	inbox := fmt.Sprintf("processed_events rows for the event: %d", f.InboxRows)
	if f.Effects < 0 {
		return Card{State: fmt.Sprintf("inbox-%d", f.InboxRows), Label: fmt.Sprintf("%d inbox rows", f.InboxRows),
			Lines: []string{inbox, "changes not counted (read-only mode)"}}
	}
	word := "changes"
	if f.Effects == 1 {
		word = "change"
	}
	return Card{State: fmt.Sprintf("effects-%d", f.Effects), Label: fmt.Sprintf("%d %s", f.Effects, word),
		Lines: []string{fmt.Sprintf("business changes of the order: %d", f.Effects), inbox}}
}

func offsetCard(f Facts) Card {
	where := fmt.Sprintf("key %s → partition %d of %d", f.OrderID, f.Partition, f.Partitions)
	committed := "group offset: none committed"
	if f.Committed >= 0 {
		committed = fmt.Sprintf("group offset: %d", f.Committed)
	}
	if len(f.Records) == 0 {
		return Card{State: "not-published", Label: "not in Kafka", Lines: []string{where, "no record with this event id", committed}}
	}
	last := f.Records[len(f.Records)-1]
	lines := []string{where}
	for _, r := range f.Records {
		lines = append(lines, fmt.Sprintf("record at partition %d offset %d", r.Partition, r.Offset))
	}
	if len(f.DeadLetters) > 0 {
		lines = append(lines, fmt.Sprintf("dead letters with this event id: %d", len(f.DeadLetters)))
	}
	lines = append(lines, committed)
	if f.Committed > last.Offset {
		return Card{State: "committed", Label: fmt.Sprintf("committed (p%d, offset %d)", last.Partition, last.Offset), Lines: lines}
	}
	return Card{State: "not-committed", Label: fmt.Sprintf("not committed (p%d, offset %d)", last.Partition, last.Offset), Lines: lines}
}

// Package pgoutput decodes the messages of PostgreSQL's pgoutput logical
// decoding plugin (proto_version 1, messages 'true') into committed outbox
// events. It is pure: no I/O, no goroutines, no clock.
//
// Every message is bounds-checked, so arbitrary bytes yield an error, never a
// panic. Rows are read by column name, so the outbox may have its columns in
// any order and extra ones. Payload text is kept exactly as received.
//
// Imports (floor: shared library): internal/shared/outbox and internal/shared/tracing
// only.
package pgoutput

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// HeartbeatPrefix is the logical message prefix of the relay's heartbeats
// (docs/design.md#heartbeat).
const HeartbeatPrefix = "eventforge.heartbeat"

// Kind says what a decoded message asks of the relay.
type Kind uint8

// Kinds of Item.
const (
	// KindSkip: nothing to do (Relation, Origin, Type, other tables' changes,
	// other logical messages).
	KindSkip Kind = iota
	// KindBegin: a transaction starts; Xid, FinalLSN and CommitTime are set.
	KindBegin
	// KindEvent: an INSERT into the outbox; Event is set.
	KindEvent
	// KindCommit: the transaction ends; CommitLSN, EndLSN and CommitTime are set.
	KindCommit
	// KindHeartbeat: a logical message with HeartbeatPrefix.
	KindHeartbeat
	// KindIgnored: an UPDATE, DELETE or TRUNCATE of the outbox; Op names it.
	// Counted, never published.
	KindIgnored
)

var kindNames = [...]string{"skip", "begin", "event", "commit", "heartbeat", "ignored"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Item is the outcome of decoding one message.
type Item struct {
	Kind       Kind
	Xid        uint32        // the transaction's id (all kinds inside a transaction)
	FinalLSN   pglogrepl.LSN // Begin and Commit: the commit record's LSN
	CommitTime time.Time     // Begin, Event's transaction and Commit
	Event      *outbox.Event // KindEvent; Event.CommitTime = the Begin's commit time
	CommitLSN  pglogrepl.LSN // Commit
	EndLSN     pglogrepl.LSN // Commit: TransactionEndLSN, what the relay confirms (docs/design.md#confirm-by-end-lsn)
	Prefix     string        // KindHeartbeat: the logical message prefix
	Op         string        // KindIgnored: "update", "delete" or "truncate"

	// MessageLSN and Transactional describe a KindHeartbeat message. A
	// transactional one sits between a Begin and a Commit and is confirmed by
	// the Commit's EndLSN like any transaction.
	MessageLSN    pglogrepl.LSN
	Transactional bool
}

// Decoder turns pgoutput messages into committed outbox items. Use one per
// stream session; it is not safe for concurrent use.
type Decoder struct {
	schema, table string
	cols          [numFields]string // column of each field (see columnsOf)
	extras        []outbox.Extra    // extra columns carried as headers
	spanContext   string            // the extra header holding a Debezium span context; "" none
	dropSpanCtx   bool              // spanContext is ours, not a header the mapping asked for
	tombstone     bool              // a NULL payload is a record without a value
	kind          outbox.PayloadKind
	jsonChecked   bool // with kindSet: the payload is JSON the server validated
	kindSet       bool // kind and jsonChecked override the payload column's type OID
	relations     map[uint32]*relation
	interned      map[string]string

	inTxn      bool
	xid        uint32
	finalLSN   pglogrepl.LSN
	commitTime time.Time

	vals      [numFields]value // scratch for the row being decoded
	extraVals []value          // scratch: the extra header columns
	bytea     []byte           // scratch: a decoded bytea payload
	text      []byte           // scratch: binary values turned into text

	borrow  bool         // see BorrowEvents
	scratch outbox.Event // the borrowed event
}

// NewDecoder returns a decoder that produces events for INSERTs into
// schema.table, e.g. ("public", "outbox"), with the contract's columns.
func NewDecoder(schema, table string) *Decoder {
	m := outbox.DefaultMapping()
	m.Table = schema + "." + table
	d, _ := NewMappedDecoder(&m)
	return d
}

// NewMappedDecoder returns a decoder that reads the table and columns of m:
// rows are read by column name, whatever their order.
func NewMappedDecoder(m *outbox.Mapping) (*Decoder, error) {
	mm := *m
	mm.Normalize()
	schema, table, err := mm.SplitTable()
	if err != nil {
		return nil, err
	}
	extras, err := mm.Extras()
	if err != nil {
		return nil, err
	}
	extras, spanCtx, own := spanContextExtra(extras, mm.TracingSpanContext)
	return &Decoder{
		schema:      schema,
		table:       table,
		cols:        columnsOf(&mm),
		spanContext: spanCtx,
		dropSpanCtx: own,
		extras:      extras,
		extraVals:   make([]value, len(extras)),
		tombstone:   mm.NullPayload == outbox.NullPayloadTombstone,
		relations:   make(map[uint32]*relation),
		interned:    make(map[string]string),
	}, nil
}

// SetPayloadType makes the decoder read the payload as a column of base
// type typ (a type name, as outbox.Catalog.Types has it) whatever the
// column's type OID says: for a domain, which the catalog check resolves
// to its base type (outbox.KindOf, outbox.CheckedJSON).
func (d *Decoder) SetPayloadType(typ string) {
	d.kind, d.jsonChecked, d.kindSet = outbox.KindOf(typ), outbox.CheckedJSON(typ), true
}

// BorrowEvents makes Decode return the same Event every time, with a
// Payload that aliases the message buffer: both are valid only until the
// next Decode or until the caller reuses the buffer. It is for a caller that
// copies what it keeps at once (the relay builds the Kafka record before it
// receives again), and saves two allocations and a copy per event.
func (d *Decoder) BorrowEvents() { d.borrow = true }

// Reset forgets cached relations and any open transaction. Call it on every
// reconnect (docs/design.md#relation-cache): the server sends Relation messages again.
func (d *Decoder) Reset() {
	clear(d.relations)
	d.inTxn = false
	d.xid, d.finalLSN, d.commitTime = 0, 0, time.Time{}
}

// Decode decodes one message, the WALData of an XLogData. Unless
// BorrowEvents was called, the returned Item does not alias walData: the
// caller may reuse the buffer.
func (d *Decoder) Decode(walData []byte) (Item, error) {
	if len(walData) == 0 {
		return Item{}, malformed("empty message")
	}
	r := &reader{b: walData[1:]}
	switch t := walData[0]; t {
	case 'B':
		return d.begin(r)
	case 'C':
		return d.commit(r)
	case 'I':
		return d.insert(r)
	case 'U':
		return d.change(r, "update")
	case 'D':
		return d.change(r, "delete")
	case 'T':
		return d.truncate(r)
	case 'M':
		return d.message(r)
	case 'R':
		return Item{}, d.decodeRelation(r)
	case 'O': // origin: LSN and name
		r.u64()
		r.cstring()
		return Item{}, r.done("origin")
	case 'Y': // type: oid, namespace, name
		r.u32()
		r.cstring()
		r.cstring()
		return Item{}, r.done("type")
	case 'S', 'E', 'c', 'A':
		return Item{}, fmt.Errorf("%w: streamed transaction message %q (request proto_version 1 or streaming off)", ErrUnsupported, t)
	case 'b', 'P', 'K', 'r', 'p':
		return Item{}, fmt.Errorf("%w: two-phase commit message %q", ErrUnsupported, t)
	default:
		return Item{}, fmt.Errorf("%w: message type %q", ErrUnsupported, t)
	}
}

func (d *Decoder) begin(r *reader) (Item, error) {
	final := pglogrepl.LSN(r.u64())
	ts := r.timestamp()
	xid := r.u32()
	if err := r.done("begin"); err != nil {
		return Item{}, err
	}
	if d.inTxn {
		return Item{}, malformed("begin of xid %d inside xid %d", xid, d.xid)
	}
	d.inTxn, d.xid, d.finalLSN, d.commitTime = true, xid, final, ts
	return Item{Kind: KindBegin, Xid: xid, FinalLSN: final, CommitTime: ts}, nil
}

func (d *Decoder) commit(r *reader) (Item, error) {
	r.u8() // flags, unused
	commitLSN := pglogrepl.LSN(r.u64())
	end := pglogrepl.LSN(r.u64())
	ts := r.timestamp()
	if err := r.done("commit"); err != nil {
		return Item{}, err
	}
	if !d.inTxn {
		return Item{}, malformed("commit at %s without begin", commitLSN)
	}
	if commitLSN != d.finalLSN {
		return Item{}, malformed("commit LSN %s of xid %d differs from its begin's %s", commitLSN, d.xid, d.finalLSN)
	}
	if end < commitLSN {
		return Item{}, malformed("end LSN %s of xid %d is before its commit LSN %s", end, d.xid, commitLSN)
	}
	it := Item{Kind: KindCommit, Xid: d.xid, FinalLSN: d.finalLSN, CommitTime: ts, CommitLSN: commitLSN, EndLSN: end}
	d.inTxn = false
	return it, nil
}

// relationOf looks up the relation a row change names.
func (d *Decoder) relationOf(r *reader, what string) (*relation, error) {
	id := r.u32()
	if r.short {
		return nil, malformed("%s message is truncated", what)
	}
	rel, ok := d.relations[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s of relation id %d", ErrUnknownRelation, what, id)
	}
	if !d.inTxn {
		return nil, malformed("%s of %s outside a transaction", what, rel.name)
	}
	return rel, nil
}

func (d *Decoder) insert(r *reader) (Item, error) {
	rel, err := d.relationOf(r, "insert")
	if err != nil || !rel.target {
		return Item{}, err
	}
	if tag := r.u8(); tag != 'N' {
		return Item{}, malformed("insert tuple tag %q, want 'N'", tag)
	}
	d.vals = [numFields]value{}
	clear(d.extraVals)
	if err := decodeTuple(r, rel, &d.vals, d.extraVals, &d.text); err != nil {
		return Item{}, err
	}
	e, err := d.event(rel, &d.vals)
	if err != nil {
		return Item{}, err
	}
	return Item{Kind: KindEvent, Xid: d.xid, CommitTime: d.commitTime, Event: e}, nil
}

// change handles UPDATE and DELETE: of the outbox they are counted, never
// published; their tuples are not read.
func (d *Decoder) change(r *reader, op string) (Item, error) {
	rel, err := d.relationOf(r, op)
	if err != nil || !rel.target {
		return Item{}, err
	}
	return Item{Kind: KindIgnored, Xid: d.xid, Op: op}, nil
}

func (d *Decoder) truncate(r *reader) (Item, error) {
	n := r.u32()
	r.u8() // options
	if r.short || uint64(len(r.b)) != 4*uint64(n) {
		return Item{}, malformed("truncate message of %d relations has %d bytes of ids", n, len(r.b))
	}
	if !d.inTxn {
		return Item{}, malformed("truncate outside a transaction")
	}
	hit := false
	for range n {
		id := r.u32()
		rel, ok := d.relations[id]
		if !ok {
			return Item{}, fmt.Errorf("%w: truncate of relation id %d", ErrUnknownRelation, id)
		}
		hit = hit || rel.target
	}
	if !hit {
		return Item{}, nil
	}
	return Item{Kind: KindIgnored, Xid: d.xid, Op: "truncate"}, nil
}

func (d *Decoder) message(r *reader) (Item, error) {
	flags := r.u8()
	lsn := pglogrepl.LSN(r.u64())
	prefix := r.cstring()
	r.take(int(r.u32())) // content
	if err := r.done("logical"); err != nil {
		return Item{}, err
	}
	if string(prefix) != HeartbeatPrefix {
		return Item{}, nil
	}
	it := Item{Kind: KindHeartbeat, Prefix: HeartbeatPrefix, MessageLSN: lsn, Transactional: flags&1 != 0}
	if it.Transactional {
		if !d.inTxn {
			return Item{}, malformed("transactional message at %s outside a transaction", lsn)
		}
		it.Xid = d.xid
	}
	return it, nil
}

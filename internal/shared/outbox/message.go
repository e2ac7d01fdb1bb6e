package outbox

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// reserved are header names the contract fills itself; entries of the headers
// column with these names are not allowed to override them.
var reserved = map[string]bool{HeaderEventID: true, HeaderEventType: true, HeaderAggregateType: true}

// The contract's header names as bytes, shared by every record: sarama only
// reads header keys, so they need no copy per event.
var (
	keyEventID       = []byte(HeaderEventID)
	keyEventType     = []byte(HeaderEventType)
	keyAggregateType = []byte(HeaderAggregateType)
)

// uuidLen is the length of a UUID's text form.
const uuidLen = 36

// Message builds the Kafka record of the contract for e: key = aggregate id,
// value = compact JSON payload, timestamp = commit time, headers = event_id,
// event_type, aggregate_type, then the string entries of the headers column
// sorted by name.
func Message(e *Event, topicPrefix string) (*sarama.ProducerMessage, error) {
	if err := CheckHeaders(e.Headers); err != nil {
		return nil, err
	}
	r := new(Record)
	if err := r.build(e, e.Topic(topicPrefix), contractConverters); err != nil {
		return nil, err
	}
	return &r.Msg, nil
}

// Record is the Kafka record of one event together with the storage its key,
// value and headers point into, so that building one costs two allocations:
// the Record (often inside a larger struct) and one byte buffer. A Record
// built again after Reuse writes into the buffer of its last build when it
// is large enough, and then costs none.
type Record struct {
	Msg        sarama.ProducerMessage
	key, value sarama.ByteEncoder
	buf        []byte // what key, value and headers point into
	// headers holds the contract's three and room for one more (a
	// headers column's entry, or the traceparent the relay's tracing sets)
	// before the slice needs an allocation of its own.
	headers [4]sarama.RecordHeader

	// Trace is the relay's tracing of the record when it is traced (nil
	// otherwise): the send span it is part of, settled on the broker's ack.
	Trace any
}

// Builder builds the records of one relay session: the per-event hot path.
// It caches topic names. Not safe for concurrent use.
type Builder struct {
	prefix  string
	topics  map[string]string // aggregate type -> topic
	format  string            // FormatEventForge when empty
	source  string            // ce_source of FormatCloudEvents
	conv    converters
	context []sarama.RecordHeader // Debezium's context headers, when asked for
	// unavailable hears of ErrUnavailable errors (OnUnavailable).
	unavailable func(error)
}

// converters are the key and value converters of a record.
type converters struct {
	key   KeyConverter
	value ValueConverter
}

// contractConverters write the contract's key and value.
var contractConverters = converters{key: stringKey{}, value: compactConverter{}}

// maxCachedTopics bounds the topic cache; past it names are built per event.
const maxCachedTopics = 4096

// NewBuilder returns a Builder for topics named prefix + aggregate type.
func NewBuilder(topicPrefix string) *Builder {
	return &Builder{prefix: topicPrefix, topics: make(map[string]string), conv: contractConverters}
}

// Build fills r with the record of e, as Message does; an event whose
// headers use a reserved name (CheckHeaders) gets an error instead, which
// the relay records as the reason it sets the event aside. The record does not
// alias e, whose buffers the caller may reuse.
//
// An error that wraps ErrUnavailable is not the event's fault (a schema
// registry that does not answer): the caller must not set the event
// aside; the function given to OnUnavailable hears of it first.
func (b *Builder) Build(r *Record, e *Event) error {
	if err := CheckHeaders(e.Headers); err != nil {
		return err
	}
	err := b.build(r, e)
	if err != nil && b.unavailable != nil && errors.Is(err, ErrUnavailable) {
		b.unavailable(err)
	}
	return err
}

func (b *Builder) build(r *Record, e *Event) error {
	switch b.format {
	case FormatCloudEvents:
		return r.buildCloudEvents(e, b.Topic(e), b.source, b.conv)
	case FormatDebezium:
		return r.buildDebezium(e, b.Topic(e), b.context, b.conv)
	}
	return r.build(e, b.Topic(e), b.conv)
}

// OnUnavailable makes b call fn with every error of Build that wraps
// ErrUnavailable, before Build returns it: the relay ends its session
// with it, so that the event is retried and never set aside.
func (b *Builder) OnUnavailable(fn func(error)) *Builder {
	b.unavailable = fn
	return b
}

// WithFormat makes b write records in the mapping's record format, with
// its key and value converters (each record's value is decided by the
// value converter alone) and, when it names a Debezium logical name,
// Debezium's context headers. A mapping that Validate accepts always
// gives converters: were it not so, b keeps the contract's.
func (b *Builder) WithFormat(m *Mapping) *Builder {
	b.format, b.source = m.Format, m.CloudEventsSource
	cols := m.ColumnSchemas()
	if m.ValueEncoder != nil {
		b.conv.value = m.ValueEncoder
	} else if v, err := NewValueConverter(m.EffectiveValueConverter(), cols); err == nil {
		b.conv.value = v
	}
	if k, err := NewKeyConverter(m.KeyConverter, cols); err == nil {
		b.conv.key = k
	}
	b.context = m.contextHeaders()
	return b
}

// Topic is e's topic, from the cache when it can.
func (b *Builder) Topic(e *Event) string {
	if t, ok := b.topics[e.AggregateType]; ok {
		return t
	}
	t := e.Topic(b.prefix)
	if len(b.topics) < maxCachedTopics {
		b.topics[e.AggregateType] = t
	}
	return t
}

// build lays the key, the header values and the compacted payload out in one
// buffer; the payload goes last since compaction may shorten it.
func (r *Record) build(e *Event, topic string, conv converters) error {
	var names []string
	extra := 0
	for k, v := range e.Headers {
		if !reserved[k] {
			names = append(names, k)
			extra += len(k) + len(v)
		}
	}
	buf := r.buffer(len(e.AggregateID) + uuidLen + len(e.EventType) + len(e.AggregateType) + extra + len(e.Payload))
	buf, err := r.setKey(buf, e, conv.key)
	if err != nil {
		return err
	}
	buf, id := AppendUUID(buf, e.ID)
	buf, eventType := appendPart(buf, e.EventType)
	buf, aggType := appendPart(buf, e.AggregateType)
	hs := r.headers[:0]
	if len(names) > 0 {
		hs = make([]sarama.RecordHeader, 0, 3+len(names))
	}
	hs = append(hs,
		sarama.RecordHeader{Key: keyEventID, Value: id},
		sarama.RecordHeader{Key: keyEventType, Value: eventType},
		sarama.RecordHeader{Key: keyAggregateType, Value: aggType},
	)
	sort.Strings(names)
	for _, k := range names {
		var hk, hv []byte
		buf, hk = appendPart(buf, k)
		buf, hv = appendPart(buf, e.Headers[k])
		hs = append(hs, sarama.RecordHeader{Key: hk, Value: hv})
	}
	present, err := r.setValue(buf, e, conv.value)
	if err != nil {
		return err
	}
	r.setMsg(e, topic, hs, present)
	return nil
}

// maxReusedBuffer is the largest buffer Reuse keeps: a Record kept for
// reuse holds no more than this of a large event's bytes.
const maxReusedBuffer = 4 << 10

// buffer is an empty buffer of capacity n at least for a build: the last
// build's, when Reuse kept it and it is large enough.
func (r *Record) buffer(n int) []byte {
	if cap(r.buf) >= n {
		return r.buf[:0]
	}
	r.buf = make([]byte, 0, n)
	return r.buf
}

// Reuse empties r for another build, keeping its buffer (up to
// maxReusedBuffer) for that build to write into. Nothing may use r's
// earlier record afterwards: its key, value and headers are overwritten.
func (r *Record) Reuse() {
	buf := r.buf
	if cap(buf) > maxReusedBuffer {
		buf = nil
	}
	*r = Record{buf: buf}
}

// setKey appends the key to buf with the key converter and keeps it as the
// record's key.
func (r *Record) setKey(buf []byte, e *Event, kc KeyConverter) ([]byte, error) {
	n := len(buf)
	buf, err := kc.AppendKey(buf, e)
	if err != nil {
		return buf, fmt.Errorf("key of event %s: %w", e.ID, err)
	}
	r.key = buf[n:len(buf):len(buf)]
	return buf, nil
}

// setValue appends the value to buf with the value converter, last since
// a converter may outgrow buf's capacity; present is false for a record
// without a value.
func (r *Record) setValue(buf []byte, e *Event, vc ValueConverter) (present bool, err error) {
	value, present, err := vc.AppendValue(buf[len(buf):], e)
	if err != nil || !present {
		r.value = nil
		return present, err
	}
	r.value = value
	return true, nil
}

// appendCompact appends a JSON payload compacted (compaction never
// lengthens JSON, so it stays inside the record buffer's capacity; JSON
// the server checked is not validated again).
func appendCompact(dst []byte, e *Event) ([]byte, error) {
	if e.JSONChecked {
		value, err := appendCompactChecked(dst, e.Payload)
		if err != nil {
			return dst, fmt.Errorf("compact payload of event %s: %w", e.ID, err)
		}
		return value, nil
	}
	value := bytes.NewBuffer(dst)
	if err := json.Compact(value, e.Payload); err != nil {
		return dst, fmt.Errorf("compact payload of event %s: %w", e.ID, err)
	}
	return value.Bytes(), nil
}

// setMsg fills r.Msg; a record without a value is a tombstone.
func (r *Record) setMsg(e *Event, topic string, hs []sarama.RecordHeader, present bool) {
	r.Msg = sarama.ProducerMessage{
		Topic:     topic,
		Key:       &r.key, // pointers into r: no allocation per interface value
		Value:     &r.value,
		Headers:   hs,
		Timestamp: e.CommitTime,
	}
	if !present {
		r.Msg.Value = nil
	}
}

// appendPart appends s to buf and returns it as its own capped slice.
func appendPart(buf []byte, s string) ([]byte, []byte) {
	n := len(buf)
	buf = append(buf, s...)
	return buf, buf[n:len(buf):len(buf)]
}

// AppendUUID appends the text form of id (8-4-4-4-12 lower-case hex).
func AppendUUID(buf []byte, id uuid.UUID) ([]byte, []byte) {
	n := len(buf)
	buf = append(buf, make([]byte, uuidLen)...) // no allocation within capacity
	t := buf[n : n+uuidLen : n+uuidLen]
	hex.Encode(t[0:8], id[0:4])
	t[8] = '-'
	hex.Encode(t[9:13], id[4:6])
	t[13] = '-'
	hex.Encode(t[14:18], id[6:8])
	t[18] = '-'
	hex.Encode(t[19:23], id[8:10])
	t[23] = '-'
	hex.Encode(t[24:], id[10:])
	return buf, t
}

// RecordHeaders returns the Kafka headers of e in the contract's order.
func RecordHeaders(e *Event) []sarama.RecordHeader {
	var r Record
	_ = r.build(&Event{ID: e.ID, EventType: e.EventType, AggregateType: e.AggregateType, Headers: e.Headers, Payload: []byte("0")}, "", contractConverters)
	return r.Msg.Headers
}

// StringHeaders extracts the string entries of a headers column value (a JSON
// object); other value types are not Kafka headers and are left out, and a
// JSON value that is not an object (an array, a scalar, null) has none.
// Empty input means no headers. Only text that is not JSON, or nests deeper
// than encoding/json's 10000 levels, is an error.
func StringHeaders(raw []byte) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] != '{' {
		if !json.Valid(raw) {
			return nil, errors.New("decode headers: not JSON")
		}
		return nil, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode headers object: %w", err)
	}
	var out map[string]string
	for k, v := range obj {
		if s, ok := v.(string); ok {
			if out == nil {
				out = make(map[string]string, len(obj))
			}
			out[k] = s
		}
	}
	return out, nil
}

// ErrMalformed marks a Kafka record that is not an EventForge event.
var ErrMalformed = errors.New("malformed event")

// Parse reads an event back from a consumed record: the id, type and aggregate
// type from the headers, the aggregate id from the key, the payload from the
// value. Other headers are returned in Headers. Errors wrap ErrMalformed.
//
// Records in CloudEvents' binary content mode are accepted too (ce_id and
// ce_type stand for event_id and event_type), and so are records of
// Debezium's outbox event router (header id). The payload must be JSON
// unless a content-type header names another media type.
func Parse(key, value []byte, headers []*sarama.RecordHeader) (*Event, error) {
	e := &Event{AggregateID: string(key), Payload: value}
	h := e.readHeaders(headers)
	h.adoptAlternates(e)
	if !h.haveID {
		return nil, fmt.Errorf("%w: no %s header (nor %s or %s)", ErrMalformed, HeaderEventID, HeaderCEID, HeaderDebeziumID)
	}
	id, err := uuid.ParseBytes(h.idText)
	if err != nil {
		return nil, fmt.Errorf("%w: event id header %q is not a UUID", ErrMalformed, h.idText)
	}
	e.ID = id
	if isJSONType(h.contentType) {
		if !json.Valid(value) {
			return nil, fmt.Errorf("%w: payload is not JSON", ErrMalformed)
		}
	} else {
		e.PayloadKind = PayloadBinary
	}
	return e, nil
}

// parsedHeaders is what Parse found in a record's headers besides the
// event's own fields.
type parsedHeaders struct {
	idText           []byte
	haveID, haveType bool
	contentType      string
}

// readHeaders sets e's type and aggregate type from the contract's headers
// and keeps every other header in e.Headers; the event id is returned raw.
// A later header of the same key wins.
func (e *Event) readHeaders(headers []*sarama.RecordHeader) parsedHeaders {
	var p parsedHeaders
	for _, h := range headers {
		if h == nil {
			continue
		}
		// Switching on string(h.Key) compares without allocating.
		switch string(h.Key) {
		case HeaderEventID:
			p.idText, p.haveID = h.Value, true
		case HeaderEventType:
			e.EventType, p.haveType = string(h.Value), true
		case HeaderAggregateType:
			e.AggregateType = string(h.Value)
		default:
			if string(h.Key) == HeaderContentType {
				p.contentType = string(h.Value)
			}
			if e.Headers == nil {
				e.Headers = make(map[string]string)
			}
			e.Headers[string(h.Key)] = string(h.Value)
		}
	}
	return p
}

// adoptAlternates takes the type from ce_type and the id from ce_id or
// Debezium's id when the contract's headers are missing, and removes the
// header taken from e.Headers.
func (p *parsedHeaders) adoptAlternates(e *Event) {
	if !p.haveType {
		if t, ok := e.Headers[HeaderCEType]; ok {
			e.EventType = t
			delete(e.Headers, HeaderCEType)
		}
	}
	if p.haveID {
		return
	}
	for _, alt := range []string{HeaderCEID, HeaderDebeziumID} {
		if v, ok := e.Headers[alt]; ok {
			p.idText, p.haveID = []byte(v), true
			delete(e.Headers, alt)
			return
		}
	}
}

// EventIDHeader is the event id header of a consumed record as Parse reads
// it: the last event_id, else the last ce_id (CloudEvents), else the last id
// (Debezium's router). ok is false when there is none.
func EventIDHeader(headers []*sarama.RecordHeader) (id string, ok bool) {
	best := 3
	for _, h := range headers {
		if h == nil {
			continue
		}
		rank := 3
		switch string(h.Key) {
		case HeaderEventID:
			rank = 0
		case HeaderCEID:
			rank = 1
		case HeaderDebeziumID:
			rank = 2
		}
		if rank <= best && rank < 3 {
			id, best, ok = string(h.Value), rank, true
		}
	}
	return id, ok
}

// isJSONType reports whether a content-type header value (empty: none, the
// contract's JSON) names JSON.
func isJSONType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == ContentTypeJSON || strings.HasSuffix(mt, "+json")
}

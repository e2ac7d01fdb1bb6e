package outbox

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/IBM/sarama"
)

// CloudEvents Kafka protocol binding, binary content mode: every attribute
// is a header named ce_<attribute>; the data is the record value as is, its
// media type in the content-type header.
const (
	HeaderCEID           = "ce_id"
	HeaderCESource       = "ce_source"
	HeaderCESpecVersion  = "ce_specversion"
	HeaderCEType         = "ce_type"
	HeaderCETime         = "ce_time"
	HeaderCESubject      = "ce_subject"
	HeaderCEPartitionKey = "ce_partitionkey" // the Partitioning extension: the record key
	HeaderContentType    = "content-type"
	// CESpecVersion is the CloudEvents version written.
	CESpecVersion = "1.0"
)

// HeaderDebeziumID is the one header Debezium's outbox event router adds by
// default: the event id.
const HeaderDebeziumID = "id"

// Content types of the payload kinds.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeText   = "text/plain; charset=utf-8"
	ContentTypeBinary = "application/octet-stream"
)

// ContentType is the media type of e's payload: JSON for json and jsonb
// columns and for text that holds JSON, plain text for other text, octet
// stream for bytea. Empty when the event has no payload.
func ContentType(e *Event) string {
	switch {
	case e.NoPayload:
		return ""
	case e.PayloadKind == PayloadBinary:
		return ContentTypeBinary
	case e.PayloadKind == PayloadText && !json.Valid(e.Payload):
		return ContentTypeText
	}
	return ContentTypeJSON
}

// buildCloudEvents fills r with e in CloudEvents' binary content mode: key =
// aggregate id, value = payload, headers ce_id, ce_source, ce_specversion,
// ce_type, ce_time (the commit time, RFC 3339), ce_subject and
// ce_partitionkey (the key, when not empty), content-type, then the event's
// other headers sorted by name.
func (r *Record) buildCloudEvents(e *Event, topic, source string, conv converters) error {
	hs := []sarama.RecordHeader{
		header(HeaderCEID, e.ID.String()),
		header(HeaderCESource, source),
		header(HeaderCESpecVersion, CESpecVersion),
		header(HeaderCEType, e.EventType),
	}
	if !e.CommitTime.IsZero() {
		hs = append(hs, header(HeaderCETime, e.CommitTime.UTC().Format(time.RFC3339Nano)))
	}
	if e.AggregateID != "" {
		hs = append(hs, header(HeaderCESubject, e.AggregateID), header(HeaderCEPartitionKey, e.AggregateID))
	}
	if ct := ContentType(e); ct != "" {
		hs = append(hs, header(HeaderContentType, ct))
	}
	return r.buildWith(e, topic, appendOthers(hs, e.Headers, isCloudEventsHeader), conv)
}

// buildDebezium fills r as Debezium's outbox event router does by default:
// key = aggregate id, value = payload, the connector's context headers
// when given (they come first, as the router appends to the connector's
// record's headers), header id = event id, then the event's other headers
// (extra columns) sorted by name, but for the contract's reserved names.
func (r *Record) buildDebezium(e *Event, topic string, context []sarama.RecordHeader, conv converters) error {
	hs := make([]sarama.RecordHeader, 0, len(context)+1+len(e.Headers))
	hs = append(hs, context...)
	hs = append(hs, header(HeaderDebeziumID, e.ID.String()))
	skip := func(k string) bool { return reserved[k] || k == HeaderDebeziumID || isDebeziumHeader(k) }
	return r.buildWith(e, topic, appendOthers(hs, e.Headers, skip), conv)
}

// buildWith lays out key and value and sets the given headers.
func (r *Record) buildWith(e *Event, topic string, hs []sarama.RecordHeader, conv converters) error {
	buf := r.buffer(len(e.AggregateID) + len(e.Payload))
	buf, err := r.setKey(buf, e, conv.key)
	if err != nil {
		return err
	}
	present, err := r.setValue(buf, e, conv.value)
	if err != nil {
		return err
	}
	r.setMsg(e, topic, hs, present)
	return nil
}

func header(k, v string) sarama.RecordHeader {
	return sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}
}

// appendOthers appends the entries of extra that skip does not claim,
// sorted by name.
func appendOthers(hs []sarama.RecordHeader, extra map[string]string, skip func(string) bool) []sarama.RecordHeader {
	names := make([]string, 0, len(extra))
	for k := range extra {
		if !skip(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		hs = append(hs, header(k, extra[k]))
	}
	return hs
}

// isCloudEventsHeader: attributes (ce_*) and content-type are the format's
// own, and the contract's header names stay reserved; a headers column may
// not set them.
func isCloudEventsHeader(k string) bool {
	return reserved[k] || k == HeaderContentType || len(k) >= 3 && k[:3] == "ce_"
}

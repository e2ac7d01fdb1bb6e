package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// reserved are header names the contract fills itself; entries of the headers
// column with these names are not allowed to override them.
var reserved = map[string]bool{HeaderEventID: true, HeaderEventType: true, HeaderAggregateType: true}

// Message builds the Kafka record of the contract for e: key = aggregate id,
// value = compact JSON payload, timestamp = commit time, headers = event_id,
// event_type, aggregate_type, then the string entries of the headers column
// sorted by name.
func Message(e *Event, topicPrefix string) (*sarama.ProducerMessage, error) {
	value, err := compactJSON(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("compact payload of event %s: %w", e.ID, err)
	}
	return &sarama.ProducerMessage{
		Topic:     e.Topic(topicPrefix),
		Key:       sarama.ByteEncoder(e.AggregateID),
		Value:     sarama.ByteEncoder(value),
		Headers:   RecordHeaders(e),
		Timestamp: e.CommitTime,
	}, nil
}

// RecordHeaders returns the Kafka headers of e in the contract's order.
func RecordHeaders(e *Event) []sarama.RecordHeader {
	hs := make([]sarama.RecordHeader, 0, 3+len(e.Headers))
	hs = append(hs,
		sarama.RecordHeader{Key: []byte(HeaderEventID), Value: []byte(e.ID.String())},
		sarama.RecordHeader{Key: []byte(HeaderEventType), Value: []byte(e.EventType)},
		sarama.RecordHeader{Key: []byte(HeaderAggregateType), Value: []byte(e.AggregateType)},
	)
	names := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		if !reserved[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		hs = append(hs, sarama.RecordHeader{Key: []byte(k), Value: []byte(e.Headers[k])})
	}
	return hs
}

// StringHeaders extracts the string entries of a headers column value (a JSON
// object); other value types are not Kafka headers and are left out. Empty
// input means no headers.
func StringHeaders(raw []byte) (map[string]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
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
func Parse(key, value []byte, headers []*sarama.RecordHeader) (*Event, error) {
	e := &Event{AggregateID: string(key), Payload: value}
	var idText string
	var haveID bool
	for _, h := range headers {
		if h == nil {
			continue
		}
		switch k := string(h.Key); k {
		case HeaderEventID:
			idText, haveID = string(h.Value), true
		case HeaderEventType:
			e.EventType = string(h.Value)
		case HeaderAggregateType:
			e.AggregateType = string(h.Value)
		default:
			if e.Headers == nil {
				e.Headers = make(map[string]string)
			}
			e.Headers[k] = string(h.Value)
		}
	}
	if !haveID {
		return nil, fmt.Errorf("%w: no %s header", ErrMalformed, HeaderEventID)
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return nil, fmt.Errorf("%w: %s header %q is not a UUID", ErrMalformed, HeaderEventID, idText)
	}
	e.ID = id
	if !json.Valid(value) {
		return nil, fmt.Errorf("%w: payload is not JSON", ErrMalformed)
	}
	return e, nil
}

func compactJSON(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

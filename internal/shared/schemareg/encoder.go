package schemareg

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Encoder is the relay's value converter for a registry format: it writes
// an event's JSON payload in the wire format under its subject's schema.
// Its errors are a *MismatchError or another error of the event (the
// event is set aside), or wrap outbox.ErrUnavailable (the registry did not
// answer: the event must wait).
type Encoder struct {
	cfg Config
	reg *Registry
}

// NewEncoder checks cfg (a writer's) and returns its encoder, with the
// registry's metrics on reg.
func NewEncoder(cfg Config, reg prometheus.Registerer) (*Encoder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(true); err != nil {
		return nil, err
	}
	r, err := NewRegistry(cfg, reg)
	if err != nil {
		return nil, err
	}
	return &Encoder{cfg: cfg, reg: r}, nil
}

// Registry is the encoder's registry client.
func (enc *Encoder) Registry() *Registry { return enc.reg }

// AppendValue implements outbox.ValueConverter.
func (enc *Encoder) AppendValue(dst []byte, e *outbox.Event) ([]byte, bool, error) {
	if e.NoPayload {
		return dst, false, nil // a tombstone has no value to encode
	}
	out, err := enc.appendValue(dst, e)
	if err != nil && !outbox.IsUnavailable(err) {
		enc.reg.m.rejected.WithLabelValues(e.Topic(enc.cfg.TopicPrefix)).Inc()
	}
	return out, true, err
}

func (enc *Encoder) appendValue(dst []byte, e *outbox.Event) ([]byte, error) {
	s, err := enc.schemaOf(e)
	if err != nil {
		return dst, err
	}
	if s.Type != enc.cfg.Format {
		return dst, fmt.Errorf("%s is a %s schema, not %s (--value-schema)", s.where(), s.Type, enc.cfg.Format)
	}
	if e.PayloadKind == outbox.PayloadBinary {
		return dst, errors.New("a bytea payload cannot be encoded under a schema: use a json, jsonb or text column holding JSON")
	}
	mark := len(dst)
	dst = appendHeader(dst, s.ID)
	out, err := s.codec.encode(dst, e.Payload)
	if err != nil {
		return out[:mark], finish(err, s.where())
	}
	return out, nil
}

// schemaOf is the schema e's payload is written in: the version or id its
// headers name, else its subject's latest.
func (enc *Encoder) schemaOf(e *outbox.Event) (*Schema, error) {
	ctx := context.Background() // each request is bounded by the timeout
	if v, ok := e.Headers[HeaderSchemaID]; ok {
		id, err := strconv.Atoi(v)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("header %s: %q is not a schema id", HeaderSchemaID, v)
		}
		return enc.reg.ByID(ctx, id)
	}
	subject, err := enc.Subject(e)
	if err != nil {
		return nil, err
	}
	version := 0
	if v, ok := e.Headers[HeaderSchemaVersion]; ok {
		if version, err = strconv.Atoi(v); err != nil || version <= 0 {
			return nil, fmt.Errorf("header %s: %q is not a version", HeaderSchemaVersion, v)
		}
	}
	return enc.reg.ByVersion(ctx, subject, version)
}

// Subject is the subject of e's value under the strategy; the record name
// is the event type.
func (enc *Encoder) Subject(e *outbox.Event) (string, error) {
	topic := e.Topic(enc.cfg.TopicPrefix)
	if enc.cfg.SubjectStrategy == StrategyTopic {
		return topic + "-value", nil
	}
	if e.EventType == "" {
		return "", fmt.Errorf("subject strategy %s names the subject after the event type, and this event has none", enc.cfg.SubjectStrategy)
	}
	if enc.cfg.SubjectStrategy == StrategyRecord {
		return e.EventType, nil
	}
	return topic + "-" + e.EventType, nil
}

package schemareg

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Decoder reads framed values back as JSON, in whichever format the
// registry gives their schema id.
type Decoder struct {
	reg *Registry
}

// NewDecoder checks cfg (a reader's: no format) and returns its decoder,
// with the registry's metrics on reg.
func NewDecoder(cfg Config, reg prometheus.Registerer) (*Decoder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(false); err != nil {
		return nil, err
	}
	r, err := NewRegistry(cfg, reg)
	if err != nil {
		return nil, err
	}
	return &Decoder{reg: r}, nil
}

// Decode returns the JSON of a framed value. An error wrapping
// outbox.ErrUnavailable is the registry's (retry); any other the value's.
func (d *Decoder) Decode(ctx context.Context, value []byte) ([]byte, error) {
	id, body, err := SplitFrame(value)
	if err != nil {
		return nil, err
	}
	s, err := d.reg.ByID(ctx, id)
	if err != nil {
		return nil, err
	}
	out, err := s.codec.decode(make([]byte, 0, 2*len(body)+16), body)
	if err != nil {
		return nil, fmt.Errorf("decode %s value of schema id %d: %w", s.Type, id, err)
	}
	return out, nil
}

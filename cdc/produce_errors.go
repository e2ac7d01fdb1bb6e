package cdc

import (
	"context"
	"fmt"

	"github.com/eventforge/eventforge/cdc/produce"
)

// refusalClass classifies the broker's refusal err of p in the
// exactly-once path. A too-large refusal becomes a rejection when tooLarge
// finds the record over its topic's limit (else tooLarge's error ends the
// session); a rejection without a reason of its own gets the broker's.
func refusalClass(ctx context.Context, p *pending, err error,
	tooLarge func(context.Context, *pending, error) (string, error)) (produce.Class, error) {
	class := produce.Classify(err)
	if class == produce.TooLarge {
		reason, terr := tooLarge(ctx, p, err)
		if terr != nil {
			return class, terr
		}
		p.reason, class = reason, produce.Reject
	}
	if class == produce.Reject && p.reason == "" {
		p.reason = fmt.Sprintf("the broker refused the record: %v", err)
	}
	return class, nil
}

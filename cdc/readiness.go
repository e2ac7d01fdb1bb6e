package cdc

import "context"

// ReadinessRegistrar takes the relay's readiness check; New registers it
// under the name "cdc". A check returns nil when ready, or why not, quickly
// and without secrets. The ops server's Readiness is one; a program
// embedding the relay may pass its own, or nil.
type ReadinessRegistrar interface {
	Add(name string, check func(ctx context.Context) error)
}

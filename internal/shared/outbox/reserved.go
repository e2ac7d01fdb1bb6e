package outbox

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// The headers column entries under ReservedHeaderPrefix that an outbox
// writer may set: they pick the registry schema of the event's value
// (docs/schema-registry.md) and mark nothing as a dead letter or a replay.
const (
	HeaderSchemaID      = "x-eventforge-schema-id"
	HeaderSchemaVersion = "x-eventforge-schema-version"
)

// ErrReservedHeader is wrapped by CheckHeaders's errors.
var ErrReservedHeader = errors.New("reserved header name")

// CheckHeaders refuses headers column entries whose names EventForge keeps
// for itself: those starting with ReservedHeaderPrefix, in any case, but
// for the two that pick a registry schema. They
// mark dead letters and replays, which workers and dlq replay trust, so an
// outbox writer must not be able to forge them. The error names the first
// such entry (by name order) and wraps ErrReservedHeader.
func CheckHeaders(headers map[string]string) error {
	var bad []string
	for k := range headers {
		if strings.EqualFold(k, HeaderSchemaID) || strings.EqualFold(k, HeaderSchemaVersion) {
			continue
		}
		if len(k) >= len(ReservedHeaderPrefix) && strings.EqualFold(k[:len(ReservedHeaderPrefix)], ReservedHeaderPrefix) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%w: the headers column sets %q; names starting with %q are written only by EventForge's dead-letter and replay paths",
		ErrReservedHeader, TruncateName(bad[0]), ReservedHeaderPrefix)
}

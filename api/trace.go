package api

import (
	"net/http"
	"strings"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// maxTracestateLen bounds the tracestate carried from a request into the
// outbox event's headers (outbox.HeaderTracestate).
const maxTracestateLen = 512

// traceHeaders returns the outbox headers for a request: traceparent (and
// tracestate with it) when traceparent is well formed, otherwise nothing.
// A malformed traceparent is dropped, not refused: tracing must never fail an
// order.
func traceHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	tp := strings.TrimSpace(h.Get(outbox.HeaderTraceparent))
	if !validTraceparent(tp) {
		return out
	}
	out[outbox.HeaderTraceparent] = tp
	if ts := strings.TrimSpace(h.Get(outbox.HeaderTracestate)); ts != "" && len(ts) <= maxTracestateLen && printableASCII(ts) {
		out[outbox.HeaderTracestate] = ts
	}
	return out
}

// validTraceparent checks version-traceid-parentid-flags: lower-case hex of
// 2-32-16-2 digits, version not ff, ids not all zero. Later versions may
// append fields after another dash.
func validTraceparent(s string) bool {
	if !traceparentFraming(s) {
		return false
	}
	version, traceID, parentID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags) {
		return false
	}
	if version == "ff" || (version == "00" && len(s) != 55) {
		return false
	}
	return strings.Trim(traceID, "0") != "" && strings.Trim(parentID, "0") != ""
}

// traceparentFraming checks the length, the dashes between the four fields
// (and before any field a later version appends) and that every byte is
// printable ASCII.
func traceparentFraming(s string) bool {
	if len(s) < 55 || len(s) > 256 || (len(s) > 55 && s[55] != '-') || !printableASCII(s) {
		return false
	}
	return s[2] == '-' && s[35] == '-' && s[52] == '-'
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

package outbox

import (
	"fmt"
	"strings"
)

// MaxTopicLen is Kafka's limit on a topic name (249) less room for the
// worker's dead-letter topic "<topic>.dlq": a longer topic could be published
// but its dead letters could not.
const MaxTopicLen = 249 - len(DLQSuffix)

// TopicProblem says why name cannot be a topic the relay produces to, or ""
// when it can: Kafka's rules ([a-zA-Z0-9._-], not "." or "..")
// plus the relay's own: at most 245 characters, to leave room for ".dlq",
// and no names starting with "__", which Kafka keeps for
// its internal topics (__consumer_offsets, __transaction_state, …).
func TopicProblem(name string) string {
	switch {
	case name == "":
		return "empty topic name (aggregate_type is empty and there is no --topic-prefix)"
	case name == "." || name == "..":
		return fmt.Sprintf("topic name %q is not allowed by Kafka", name)
	case len(name) > MaxTopicLen:
		return fmt.Sprintf("topic name of %d characters is longer than %d (Kafka's 249 less room for the .dlq dead-letter topic)", len(name), MaxTopicLen)
	case strings.HasPrefix(name, "__"):
		return fmt.Sprintf("topic name %q starts with \"__\", which Kafka keeps for internal topics", TruncateName(name))
	}
	return badTopicByte(name)
}

// badTopicByte names the first byte of name that Kafka does not allow in a
// topic name, or returns "" when there is none.
func badTopicByte(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; !topicByte(c) {
			ch := fmt.Sprintf("%q", c)
			if c < 0x20 || c >= 0x7f {
				ch = fmt.Sprintf("byte %#02x", c)
			}
			return fmt.Sprintf("topic name %q has %s at byte %d: Kafka allows only ASCII letters, digits, '.', '_' and '-'", TruncateName(name), ch, i)
		}
	}
	return ""
}

// topicByte reports whether Kafka allows c in a topic name: [a-zA-Z0-9._-].
func topicByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// TruncateName keeps an error's reason short when a hostile name is long.
func TruncateName(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

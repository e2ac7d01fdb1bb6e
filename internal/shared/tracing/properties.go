package tracing

import "strings"

// FromProperties reads a span context stored the way Debezium's outbox
// stores one in its tracingspancontext column: Java properties text, one
// key=value (or key:value, or key value) a line, # and ! starting comments.
// It returns the traceparent and tracestate entries, empty when absent.
// Backslash escapes are undone; line continuations are not needed by these
// values and not supported.
func FromProperties(text string) (traceparent, tracestate string) {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimLeft(strings.TrimRight(line, "\r"), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v := splitProperty(line)
		switch k {
		case Traceparent:
			traceparent = v
		case Tracestate:
			tracestate = v
		}
	}
	return traceparent, tracestate
}

// splitProperty splits a properties line at its first unescaped =, : or
// white space, as java.util.Properties.load does.
func splitProperty(line string) (key, value string) {
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' {
			break
		}
	}
	key = unescape(line[:min(i, len(line))])
	rest := strings.TrimLeft(line[min(i, len(line)):], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, unescape(rest)
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

package outbox

import (
	"bytes"
	"fmt"
)

// appendCompactChecked appends src to dst without the whitespace outside
// strings, as json.Compact does, but without validating the syntax: src
// must be JSON the server already checked (the output of a json or jsonb
// column, see CheckedJSON). It copies runs between whitespace and jumps
// over strings with IndexByte, several times faster than json.Compact's
// scanner, which was the largest single cost of building a record. Like
// json.Compact it refuses nesting deeper than maxJSONDepth, which
// PostgreSQL accepts but Go's decoder (and so a Go consumer) does not. On
// input that is not JSON it never panics, but its output is unspecified.
func appendCompactChecked(dst, src []byte) ([]byte, error) {
	depth := 0
	for i := 0; i < len(src); {
		switch c := src[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := stringEnd(src, i+1)
			dst = append(dst, src[i:end]...)
			i = end
		case '{', '[':
			if depth++; depth > maxJSONDepth {
				return dst, fmt.Errorf("invalid character %q exceeded max depth", c)
			}
			dst = append(dst, c)
			i++
		case '}', ']':
			depth--
			dst = append(dst, c)
			i++
		default:
			end := i + 1
			for end < len(src) && !isSpecial(src[end]) {
				end++
			}
			dst = append(dst, src[i:end]...)
			i = end
		}
	}
	return dst, nil
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// stringEnd is the index just past the quote that closes the string whose
// contents start at i: the first quote not escaped by an odd number of
// backslashes; len(src) when the string never closes.
func stringEnd(src []byte, i int) int {
	for {
		k := bytes.IndexByte(src[i:], '"')
		if k < 0 {
			return len(src)
		}
		q := i + k
		slashes := 0
		for p := q - 1; p >= i && src[p] == '\\'; p-- {
			slashes++
		}
		if slashes%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// isSpecial reports the bytes appendCompactChecked acts on.
func isSpecial(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '{', '[', '}', ']':
		return true
	}
	return false
}

// CheckedJSON reports whether a payload column of type typ (its base type
// name, as Catalog.Types has it) only ever holds JSON the server validated:
// json and jsonb, and domains over them.
func CheckedJSON(typ string) bool { return typ == "json" || typ == "jsonb" }

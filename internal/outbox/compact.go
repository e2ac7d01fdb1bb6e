package outbox

import "bytes"

// appendCompactChecked appends src to dst without the whitespace outside
// strings, as json.Compact does, but without validating: src must be JSON
// the server already checked (the output of a json or jsonb column, see
// CheckedJSON). It copies runs between whitespace and jumps over strings
// with IndexByte, several times faster than json.Compact's scanner, which
// was the largest single cost of building a record. On input that is not
// JSON it never panics, but its output is unspecified.
func appendCompactChecked(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := stringEnd(src, i+1)
			dst = append(dst, src[i:end]...)
			i = end
		default:
			end := i + 1
			for end < len(src) && !isSpaceOrQuote(src[end]) {
				end++
			}
			dst = append(dst, src[i:end]...)
			i = end
		}
	}
	return dst
}

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

func isSpaceOrQuote(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"'
}

// CheckedJSON reports whether a payload column of type typ (its base type
// name, as Catalog.Types has it) only ever holds JSON the server validated:
// json and jsonb, and domains over them.
func CheckedJSON(typ string) bool { return typ == "json" || typ == "jsonb" }

package outbox

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// Kafka Connect's JsonConverter writes JSON with Jackson's default
// generator. The functions here write the same bytes for the values the
// converters here produce: strings, base64 bytes and doubles.

// upperHex is Jackson's digit set for \uXXXX escapes (upper case).
const upperHex = "0123456789ABCDEF"

// appendJacksonString appends s as a JSON string the way Jackson's UTF-8
// generator writes it: '"' and '\\' escaped with a backslash, the control
// characters below 0x20 as \b \t \n \f \r or \u00XX, characters outside the
// Basic Multilingual Plane as an escaped UTF-16 surrogate pair
// (\uD83D\uDE00), everything else (DEL, '/', '<', U+2028) as is. Invalid
// UTF-8 (PostgreSQL's text never holds any) is written as U+FFFD, as Java's
// decoder reads it.
func appendJacksonString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = appendJacksonEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r != utf8.RuneError && r < 0x10000 {
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		if r == utf8.RuneError {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			hi, lo := surrogates(r)
			dst = appendU(appendU(dst, hi), lo)
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJacksonEscape appends the escape of an ASCII byte that needs one.
func appendJacksonEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	return appendU(dst, rune(c))
}

// appendU appends \uXXXX for a UTF-16 code unit.
func appendU(dst []byte, u rune) []byte {
	return append(dst, '\\', 'u', upperHex[u>>12&0xF], upperHex[u>>8&0xF], upperHex[u>>4&0xF], upperHex[u&0xF])
}

// surrogates splits a rune above the BMP into its UTF-16 pair.
func surrogates(r rune) (hi, lo rune) {
	r -= 0x10000
	return 0xD800 + r>>10&0x3FF, 0xDC00 + r&0x3FF
}

// appendJacksonBytes appends b as Jackson writes a binary node: a JSON
// string of standard base64 with padding, without line breaks.
func appendJacksonBytes(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendJavaDouble appends f as Java's Double.toString writes it (and so
// Jackson a double): the shortest decimal that reads back as f, with at
// least one digit after the point; plain between 10^-3 and 10^7, else
// d.dddE±n ("1.0E20", "1.5E-7"); "-0.0" for negative zero. NaN and
// infinities, which JSON text cannot hold, are never passed.
func appendJavaDouble(dst []byte, f float64) []byte {
	if f == 0 {
		if 1/f < 0 {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// digits d1d2…dn and exponent e: f = 0.d1d2…dn × 10^e.
	sci := strconv.AppendFloat(nil, f, 'e', -1, 64) // d.ddde±xx
	mant, exp := sci, 0
	for i, c := range sci {
		if c == 'e' {
			mant = sci[:i]
			exp, _ = strconv.Atoi(string(sci[i+1:]))
			break
		}
	}
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if f >= 1e-3 && f < 1e7 {
		return appendPlainDigits(dst, digits, exp)
	}
	dst = append(dst, digits[0], '.')
	if len(digits) > 1 {
		dst = append(dst, digits[1:]...)
	} else {
		dst = append(dst, '0')
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp), 10)
}

// appendPlainDigits writes d1.d2d3… × 10^exp without an exponent.
func appendPlainDigits(dst, digits []byte, exp int) []byte {
	if exp < 0 {
		dst = append(dst, '0', '.')
		for i := -1; i > exp; i-- {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	intLen := exp + 1
	for i := 0; i < intLen; i++ {
		if i < len(digits) {
			dst = append(dst, digits[i])
		} else {
			dst = append(dst, '0')
		}
	}
	dst = append(dst, '.')
	if intLen >= len(digits) {
		return append(dst, '0')
	}
	return append(dst, digits[intLen:]...)
}

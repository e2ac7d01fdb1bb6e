package outbox

import (
	"math"
	"testing"
)

// TestJavaDouble: doubles as Jackson 2.19 on a JDK wrote them (Java's
// Double.toString). 4.9E-324, the smallest subnormal, is left out: Java
// keeps two digits for it where the shortest form is 5.0E-324.
func TestJavaDouble(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1.0, "1.0"}, {1000.0, "1000.0"}, {1e20, "1.0E20"}, {1e-5, "1.0E-5"}, {0.001, "0.001"}, {1e7, "1.0E7"},
		{9999999.0, "9999999.0"}, {12345678.9, "1.23456789E7"}, {0.1, "0.1"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1.5e-7, "1.5E-7"},
		{123456789012345678901234567890.0, "1.2345678901234568E29"}, {2.5, "2.5"}, {1e21, "1.0E21"},
		{1.7976931348623157e308, "1.7976931348623157E308"}, {0.3, "0.3"}, {100.5, "100.5"}, {9.999999e-4, "9.999999E-4"},
		{-2.5, "-2.5"}, {123.456, "123.456"},
	} {
		if got := string(appendJavaDouble(nil, c.f)); got != c.want {
			t.Errorf("%v: got %s, want %s", c.f, got, c.want)
		}
	}
}

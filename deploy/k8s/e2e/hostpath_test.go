package e2e

import "testing"

// TestHostPath: a value under a mount path is rewritten once, by the longest
// mount path, even when the directory standing in for it lies under another
// mount path (/tmp), whatever the map's order.
func TestHostPath(t *testing.T) {
	mounts := map[string]string{
		"/tmp":                      "/tmp/TestX/010",
		"/etc/eventforge/api-token": "/tmp/TestX/011",
		"/etc/eventforge":           "/tmp/TestX/012",
	}
	for _, tc := range []struct{ in, want string }{
		{"/etc/eventforge/api-token/token", "/tmp/TestX/011/token"},
		{"/etc/eventforge/handlers.yaml", "/tmp/TestX/012/handlers.yaml"},
		{"/tmp/scratch", "/tmp/TestX/010/scratch"},
		{"/tmp", "/tmp"}, // the mount path itself is not a file under it
		{"/var/lib/x", "/var/lib/x"},
		{"postgres://db/x", "postgres://db/x"},
	} {
		for range 20 { // map order varies between iterations
			if got := hostPath(tc.in, mounts); got != tc.want {
				t.Fatalf("hostPath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		}
	}
}

package testenv

import (
	"testing"

	"github.com/eventforge/eventforge/internal/testsupport/childproc"
)

// FreeAddr returns a loopback host:port that nothing listened on a moment
// ago, for a subprocess's metrics or HTTP address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

package childproc

import (
	"net"
	"slices"
	"testing"
)

func TestWithoutEventForge(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"none", nil, []string{}},
		{"kept and dropped", []string{"PATH=/bin", "EVENTFORGE_PG_URL=x", "EVENTFORGE_FAILPOINTS=a", "OTEL_SERVICE_NAME=s"}, []string{"PATH=/bin", "OTEL_SERVICE_NAME=s"}},
		{"prefix only at the start", []string{"MY_EVENTFORGE_X=1", "eventforge_x=1"}, []string{"MY_EVENTFORGE_X=1", "eventforge_x=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			if got := WithoutEventForge(in); !slices.Equal(got, tc.want) {
				t.Errorf("WithoutEventForge(%q) = %q, want %q", tc.env, got, tc.want)
			}
			if !slices.Equal(in, tc.env) {
				t.Errorf("WithoutEventForge changed its input: %q", in)
			}
		})
	}
}

func TestFreeAddrCanBeListenedOn(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	ln.Close()
}

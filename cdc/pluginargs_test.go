package cdc

import (
	"slices"
	"testing"
)

func TestPluginArgsAskForBinaryTuples(t *testing.T) {
	for _, tc := range []struct {
		version    string
		textTuples bool
		binary     bool
	}{
		{"15.18 (Debian 15.18-0+deb12u1)", false, true},
		{"14.0", false, true},
		{"17.5", false, true},
		{"13.14", false, false},
		{"18beta1", false, true},
		{"", false, false},
		{"garbage", false, false},
		{"16.2", true, false}, // a column refused binary in this process
	} {
		r := &Relay{cfg: Config{Publication: "pub"}}
		r.textTuples.Store(tc.textTuples)
		args := r.pluginArgs(tc.version)
		if got := slices.Contains(args, "binary 'true'"); got != tc.binary {
			t.Errorf("pluginArgs(%q, text only %v) = %v: binary %v, want %v", tc.version, tc.textTuples, args, got, tc.binary)
		}
		if !slices.Contains(args, "publication_names 'pub'") || !slices.Contains(args, "messages 'true'") {
			t.Errorf("pluginArgs(%q) = %v lacks the publication or messages", tc.version, args)
		}
	}
}

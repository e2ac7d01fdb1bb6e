package main

import "github.com/eventforge/eventforge/internal/shared/ops"

// pprofUsage is the help of the --pprof flag of the long-running commands.
const pprofUsage = "also serve net/http/pprof under /debug/pprof/ on --metrics-addr (exposes memory contents: keep it on a private address)"

// pprofOption is the ops.Handler option --pprof asks for.
func pprofOption(on bool) []ops.Option {
	if on {
		return []ops.Option{ops.WithPprof()}
	}
	return nil
}

package gateway

import (
	"net/http"
	"net/http/pprof"
)

// pprofHandler serves Go's runtime profiles under /debug/pprof/ for
// operators who turn them on (--pprof): a CPU profile costs the process
// while it runs, and the profiles show what the process holds, so they
// are off by default; with tokens configured they need the admin role.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

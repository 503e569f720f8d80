// Package observe puts the apiserver's observability in front of an HTTP API: Prometheus metrics at
// /metrics with the apiserver's request metric names and labels (apiserver_request_total,
// apiserver_request_duration_seconds, apiserver_longrunning_requests for watches), net/http/pprof
// under /debug/pprof/ when asked, and a structured log line per request (debug level when
// answered, info when refused with a 4xx, warn when failed with a 5xx), so that at the default
// info level every refused request is one line.
//
// # API
//
//   - Wrap(handler, Options) returns the handler behind the metrics, the log and pprof.
//   - NewRegistry returns the registry Wrap serves by default (the Go and process collectors); a
//     server that registers more metrics (serve: the watch caches' and the watches', through
//     chain.Config.Registerer) passes the same registry to both.
//
// # Invariants
//
//   - A request is counted once with its verb (LIST, WATCH, APPLY as upstream's canonicalVerb),
//     group, version, resource, subresource, scope and code, and timed unless it is a watch; an
//     open watch is in apiserver_longrunning_requests until it ends; watches still stream through
//     the wrapper (TestWrap).
//   - The log line's level follows the answer's code; pprof is served only when asked (TestWrap).
package observe

// Package api is Idem's HTTP interface (docs/design.md §8): tables, documents, the
// batch route with optional Idempotency-Key, receipts, health and metrics.
// Errors are RFC 9457 problem details; keyed answers are the receipt's
// stored envelope, rendered the same way every time.
//
// # The components, by file
//
// Server (server.go: New, NewSharded, ServeHTTP, /healthz) is a facade over
// the components it builds and owns, each holding what it uses and nothing
// more (no embedding: every call names its component, s.failures.classify,
// s.shardMap.shardFor…):
//
//	router.go      router: the mux of the routes, dispatch, the answer to no route
//	hotroute.go    router, cont.: the batch route's and /healthz's requests known without a match
//	auth.go        authenticator: bearer token → principal, operators, SetTokens
//	body.go        bodies: a request's JSON body within its size and time bounds
//	bodypool.go    bodies, cont.: the batch bodies' buffers, recycled
//	failures.go    failures: a service failure → its problem; health
//	unavailable.go failures, cont.: store refusals counted and logged without flooding
//	shardroute.go  shardMap: a request's store shard, by table or session ID
//	shardfanout.go shardMap, cont.: the routes that name no table, over every shard
//	forward.go     peers: a keyed request sent to the node that holds its receipt
//	forwardauth.go peers, cont.: the signatures between nodes; forwarded requests admitted
//
// The routes' handlers, by group:
//
//	batch.go       batchRoute: POST /v1/tables/{table}/batch, fast or keyed
//	sessions.go    sessionRoutes: /v1/sessions (begin, stage, read, commit, abort)
//	tables.go      tableRoutes: tables, documents, a key's and a session's receipt
//	admin.go       adminRoutes: the receipt listing and an operator's resolve
//	backup.go      adminRoutes, cont.: POST /v1/admin/backup
//
// What every part shares:
//
//	problem.go     problem details and the rendering of a keyed answer's envelope
//	headers.go     the response's header value slots
//	idemkey.go     the Idempotency-Key header
//	expiry.go      the Idem-Key-Expiry header
//	reqctx.go      the context of a routed request
//	metrics.go     the Prometheus registry and the request metrics
//	connerr.go     net/http's own answers (unparsable requests) as problems
//	conngate.go    ConnGate: connection admission under -max-connections
package api

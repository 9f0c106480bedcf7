// Package httpapi is the HTTP plumbing that drover's API server and its
// agents share, apart from the handlers: the limits on what one client can
// hold of a daemon (timeouts, header size, open connections), the HTTP/2
// and TLS server around them, the one door every API request passes
// through (panic recovery, an authorization hook, error rendering), the
// error type and its HTTP status, and the JSON reading and writing every
// handler does. The handlers themselves, which read the server's store and
// call the registry, are internal/server's.
package httpapi

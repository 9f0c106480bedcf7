// Package ui is drover's web UI: static files embedded in the binary and
// served at /ui/, no framework (docs/ui.md says why). The page is plain
// HTML and JavaScript modules that read the same /v1 API as the CLI, with
// the session cookie a login link gives (internal/server's ui_session.go),
// and stay current by following GET /v1/events. Its terminal is xterm.js,
// vendored from npm into static/vendor by build.sh (committed, so building
// drover needs no npm; TestVendoredFilesMatchNPM checks the copies).
package ui

//go:generate bash build.sh

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy is the UI's: it runs only its own scripts, talks
// only to this server, and is framed by no one. Inline style attributes
// (the usage bars' widths) are the one inline thing allowed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"style-src 'self' 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the UI under /ui/.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

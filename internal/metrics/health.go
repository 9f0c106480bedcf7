package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Check is one readiness check: nil when ready, else why not.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// checkTimeout bounds each readiness check: a registry that does not
// answer makes the server not ready, not /readyz hang.
const checkTimeout = 2 * time.Second

// Livez answers 200 while the process serves HTTP: it checks nothing
// outside the process (never etcd), so an outage of the registry does not
// get every server restarted.
func Livez(w http.ResponseWriter, r *http.Request) {
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		fmt.Fprintln(w, "[+]process ok\nlivez check passed")
		return
	}
	fmt.Fprintln(w, "ok")
}

// Readyz runs the checks: 200 when all pass, 503 naming the ones that do
// not. With ?verbose every check is listed, [+] passed or [-] failed.
func Readyz(checks func() []Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, verbose := r.URL.Query()["verbose"]
		var lines []string
		failed := 0
		for _, c := range checks() {
			ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
			err := c.Run(ctx)
			cancel()
			if err != nil {
				failed++
				lines = append(lines, fmt.Sprintf("[-]%s failed: %v", c.Name, err))
			} else {
				lines = append(lines, fmt.Sprintf("[+]%s ok", c.Name))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if failed > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			verbose = true // say what is wrong
		}
		if !verbose {
			fmt.Fprintln(w, "ok")
			return
		}
		fmt.Fprintln(w, strings.Join(lines, "\n"))
		if failed > 0 {
			fmt.Fprintf(w, "readyz check failed: %d of %d\n", failed, len(lines))
		} else {
			fmt.Fprintln(w, "readyz check passed")
		}
	}
}

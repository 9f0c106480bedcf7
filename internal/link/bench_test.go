package link

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkRequestOverALink: one small request and its answer over a link
// (client and server in this process: B/op is both sides'), as an agent's
// heartbeat or status report goes.
func BenchmarkRequestOverALink(b *testing.B) {
	addr, agent, _ := linkServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}), nil)
	tr := &Transport{TLS: agent, Fallback: noFallback{b}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	body := strings.Repeat("x", 300)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hc.Post("https://"+addr+"/v1/node/n1/heartbeat", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

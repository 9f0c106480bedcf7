package link

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request whose handler returned just as the server began to shut
// down gets its answer before the goodbye: it was out of the
// connection's calls while its answer was being written, and the drain,
// seeing no call left, said goodbye first; the client then read the link's
// end for a request that had run, and sent it to another server. A large
// answer widens the moment (its copy into the frame).
func TestShutdownWaitsForAnAnswerBeingWritten(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	lost := 0
	const rounds = 10
	for range rounds {
		returning := make(chan struct{})
		s := &Server{WriteTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, big)
			close(returning)
		})}
		addr, agent, _ := linkServer(t, nil, s.ServeConn)
		l := dialRaw(t, addr, agent)
		l.get(1, "/report")
		<-returning
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done <- s.Shutdown(ctx)
		}()
		if typ, id, _, err := l.read(); err != nil || typ != frameResponse || id != 1 {
			lost++
			t.Logf("the request ran, then frame type %d for request %d, %v (want its answer)", typ, id, err)
		}
		l.c.Close()
		if err := <-done; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d requests that ran lost their answer to the drain's goodbye", lost, rounds)
	}
}

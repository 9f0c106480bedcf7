package link

import (
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Links opened, used and closed while the process forks and execs
// children (as drover dev's agent does beside its server): a child
// holding a closed link's socket between fork and exec leaves a stale
// registration in the epoll set, and its descriptor's number goes to
// another link; each link is still read, and only its own.
func TestLinksSurviveForksAndDescriptorReuse(t *testing.T) {
	if testing.Short() {
		t.Skip("a stress")
	}
	addr, agent, _ := linkServer(t, http.NotFoundHandler(), nil)
	stop := make(chan struct{})
	var forks atomic.Int64
	var fwg sync.WaitGroup
	for range 4 {
		fwg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				exec.Command("/bin/true").Run()
				forks.Add(1)
			}
		})
	}
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	var links atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				l := dialRaw(t, addr, agent)
				for i := range 3 {
					id := uint64(w)<<32 | uint64(i)
					if _, err := l.c.Write(appendFrame(nil, framePing, id, nil)); err != nil {
						t.Errorf("ping: %v", err)
						return
					}
					typ, got, _, err := l.read()
					if err != nil || typ != framePong || got != id {
						t.Errorf("link %d: frame %d for %d, %v; want the pong to %d", links.Load(), typ, got, err, id)
						return
					}
				}
				l.c.Close()
				links.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	fwg.Wait()
	t.Logf("%d links, %d forks", links.Load(), forks.Load())
}

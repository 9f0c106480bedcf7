package link

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// Frames sent in pieces of every size (several frames and records in one
// segment, a frame over several records, pauses between or none) are all
// read and answered: a server that reads only what has arrived and then
// waits for the socket misses none (a wake-up lost, a record left in
// TLS's buffers when it registers the socket again).
func TestFramesInRandomPiecesAreAllAnswered(t *testing.T) {
	addr, agent, _ := linkServer(t, http.NotFoundHandler(), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		l := dialRaw(t, addr, agent)
		var stream []byte
		const n = 200
		for i := range n {
			stream = appendFrame(stream, framePing, uint64(i), nil)
		}
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			for len(stream) > 0 {
				k := 1 + rng.IntN(min(len(stream), 80))
				if _, err := l.c.Write(stream[:k]); err != nil {
					return
				}
				stream = stream[k:]
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				}
			}
		}()
		l.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i := range n {
			typ, id, _, err := l.read()
			if err != nil || typ != framePong || id != uint64(i) {
				t.Fatalf("round %d, pong %d: frame %d for %d, %v", round, i, typ, id, err)
			}
		}
		waitChan(t, wrote, "the writes")
		l.c.Close()
	}
}

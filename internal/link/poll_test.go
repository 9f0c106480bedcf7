package link

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The tests of the link's behaviour run on connections served without a
// goroutine each (WrapConn, where the system has the poller); these run
// some of them again on connections read on a goroutine of their own, as
// ServeConn serves a connection WrapConn did not make.
func TestLinksReadOnAGoroutineOfTheirOwn(t *testing.T) {
	plainConns = true
	t.Cleanup(func() { plainConns = false })
	for name, test := range map[string]func(*testing.T){
		"share":    TestRequestsShareOneLink,
		"park":     TestParkedRequestRunsAgainWhenWoken,
		"giveup":   TestGivenUpRequestsAreTakenBack,
		"silent":   TestSilentOrOversizedClientsAreClosed,
		"shutdown": TestShutdownSaysGoodbyeAfterTheLastAnswer,
		"pieces":   TestFramesArrivingInPiecesAreReadWhole,
	} {
		t.Run(name, test)
	}
}

// slowConn writes each write in two halves, a pause between: a TLS record
// arrives in two pieces, and the server's read of the first finds the
// rest missing.
type slowConn struct{ net.Conn }

func (c slowConn) Write(p []byte) (int, error) {
	half := len(p) / 2
	n, err := c.Conn.Write(p[:half])
	if err != nil {
		return n, err
	}
	time.Sleep(30 * time.Millisecond)
	m, err := c.Conn.Write(p[half:])
	return n + m, err
}

// A frame that arrives in pieces (its header split, its message split, a
// TLS record split across writes, pauses between) is read whole: a
// server reading only what has arrived goes on where it stopped.
func TestFramesArrivingInPiecesAreReadWhole(t *testing.T) {
	addr, agent, _ := linkServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.URL.Path+" "+string(b))
	}), nil)
	tc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Clone()
	cfg.NextProtos = []string{Proto}
	c := tls.Client(slowConn{tc}, cfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("b", 3000)
	frame := appendFrame(nil, frameRequest, 7, []byte("PUT /pieces HTTP/1.1\r\nHost: drover\r\nContent-Length: 3000\r\n\r\n"+body))
	for _, piece := range [][]byte{frame[:5], frame[5:40], frame[40:1000], frame[1000:]} {
		if _, err := c.Write(piece); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	l := &rawLink{t: t, c: c}
	typ, id, msg, err := l.read()
	if err != nil {
		t.Fatal(err)
	}
	if typ != frameResponse || id != 7 || !strings.Contains(string(msg), "200 OK") || !strings.HasSuffix(string(msg), "/pieces "+body) {
		t.Fatalf("answer: type %d, id %d, %.80q; want a 200 to request 7 with /pieces and the body", typ, id, msg)
	}
}

// An idle link holds no goroutine where the poller serves it: 40 links,
// each with a request parked, add no goroutine for each.
func TestIdleLinksHoldNoGoroutine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("links are read on a goroutine each but on Linux")
	}
	h := newParkingHandler()
	addr, agent, _ := linkServer(t, h, nil)
	before := runtime.NumGoroutine()
	const n = 40
	var links []*rawLink
	for range n {
		l := dialRaw(t, addr, agent)
		l.get(1, "/wait")
		links = append(links, l)
	}
	h.waitParked(t, n)
	time.Sleep(100 * time.Millisecond) // the readers that found nothing more end
	// The test's side holds no goroutine per link either (raw links are
	// read only below).
	if grew := runtime.NumGoroutine() - before; grew > n/4 {
		t.Errorf("%d links with a parked request each added %d goroutines, want almost none", n, grew)
	}
	h.mu.Lock()
	wakes := h.wakes
	h.mu.Unlock()
	for _, wake := range wakes {
		wake()
	}
	for i, l := range links {
		typ, _, msg, err := l.read()
		if err != nil || typ != frameResponse || !strings.HasSuffix(string(msg), "woken") {
			t.Fatalf("link %d after its wake: type %d, %q, %v", i, typ, msg, err)
		}
	}
}

package chaos

import (
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections from a loopback port to one target. Cut
// blackholes it: open connections stay open but carry nothing either way,
// and new ones are accepted and carry nothing, as a network partition
// does (the peer sees no reset, only silence). Heal closes the silenced
// connections and forwards again.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = true
	return p.cut
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *proxy) handle(c net.Conn) {
	if p.track(c) {
		// Cut: hold it open, silent, until healed (then closed).
		io.Copy(io.Discard, c)
		p.untrack(c)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.untrack(c)
		return
	}
	if p.track(up) {
		p.untrack(up)
		io.Copy(io.Discard, c)
		p.untrack(c)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				cut := p.cut
				p.mu.Unlock()
				if !cut { // while cut, bytes are dropped: silence
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	p.untrack(c)
	p.untrack(up)
}

// Cut silences every connection, open and new.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal closes the connections silenced by Cut (their peers reconnect) and
// forwards new ones again.
func (p *proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Close stops the proxy and its connections.
func (p *proxy) Close() {
	p.ln.Close()
	p.Heal()
}

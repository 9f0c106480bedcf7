// Package link carries HTTP requests over one TLS connection, as
// length-prefixed frames, for the clients that hold a connection open for
// as long as they run: agents. It is HTTP/2's job done with a fraction of
// its memory on the server.
//
// Over HTTP/2 (Go's net/http) an idle agent cost its server about 67 KB:
// two goroutines per connection (its frame loop and frame reader), a third
// for the handler of the agent's blocking assignment query, a 4 KB
// response buffer held by that handler, HPACK tables and the stream's
// bookkeeping. Over a link, the server keeps one goroutine per connection,
// reading frames, and a blocking query that has nothing to answer yet is
// parked: the handler returns (ErrParked), its goroutine ends, and the
// request is run again when what it waits on changes or its wait runs out
// (Park). A waiting agent then costs its TLS connection, one goroutine
// blocked in a read, and its parked request.
//
// The link is chosen in the TLS handshake (ALPN, Proto) on the API's own
// port; a client offering it to a server that does not speak it falls back
// to HTTP (Transport.Fallback). Requests and responses are HTTP/1.1
// messages, written and read by net/http, so the handlers, the client's
// error handling and every header work as they do over HTTP; what a link
// cannot carry is a response that streams (a log follow, an event stream)
// or an upgrade (exec): the client sends those over HTTP.
//
// A frame is a 13-byte header, the length of what follows it (4 bytes,
// big-endian), its type (1 byte) and the request's ID (8 bytes), then the
// message. The client pings a connection it has heard nothing on for a
// while and closes it when the ping is not answered; the server closes a
// connection silent for longer than that.
//
// A server that shuts down drains its links (Server.Shutdown), as
// net/http drains its connections: a request already running finishes
// and is answered, a parked one runs again at once and answers what is
// there now, and a request that arrives after the drain began is refused
// unrun (a frame of its own, which the client's Transport turns into
// ErrRefused: safe to send to another server). Once its last answer is
// written the server sends TLS's close_notify and reads, unanswered, what
// the client still sent until it closes its end, so that no reset drops an
// answer on the way. A client that does not know the refusal frame (an
// older one) sees its request's link end and sends it elsewhere the same
// way. Shutdown is bounded by its context; Close cuts the links that are
// left.
package link

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Proto is the link's ALPN protocol name.
const Proto = "drover-link/1"

// Frame types.
const (
	frameRequest  byte = 1 // client -> server: an HTTP/1.1 request
	frameResponse byte = 2 // server -> client: the answer to request ID
	frameCancel   byte = 3 // client -> server: the client gave up on request ID
	framePing     byte = 4 // client -> server
	framePong     byte = 5 // server -> client
	// frameRefused: the server did not run request ID, and will not (it
	// is shutting down): the client may send it elsewhere. A client that
	// does not know it waits for the link's end instead.
	frameRefused byte = 6 // server -> client
)

const headerLen = 13

// Bounds of what one frame may carry. A request: the API's own limits on
// headers (64 KiB) and bodies (1 MiB) are under it, and a server reads no
// more from a client before those apply. A response: a node's assignments.
const (
	maxRequestFrame  = 2 << 20
	maxResponseFrame = 64 << 20
)

// Timing. A client pings after pingAfter without a frame from the server,
// and closes the connection when nothing comes within pingTimeout after
// (variables, for tests). A server closes a connection it has read
// nothing on for serverIdle (Server.IdleTimeout), which a live client's
// pings keep from happening.
var (
	pingAfter   = 5 * time.Second
	pingTimeout = 10 * time.Second
)

const serverIdle = 60 * time.Second

// appendFrame appends the frame (typ, id, msg) to b.
func appendFrame(b []byte, typ byte, id uint64, msg []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(9+len(msg)))
	b = append(b, typ)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, msg...)
}

// readFrame reads one frame of at most max bytes after its header. hdr is
// the caller's buffer for the header, so that a goroutine waiting for the
// next frame holds no other.
func readFrame(r io.Reader, hdr *[headerLen]byte, max uint32) (typ byte, id uint64, msg []byte, err error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n < 9 {
		return 0, 0, nil, fmt.Errorf("link: frame length %d is shorter than its header", n)
	}
	if n-9 > max {
		return 0, 0, nil, fmt.Errorf("link: a frame of %d bytes; at most %d are taken", n-9, max)
	}
	typ, id = hdr[4], binary.BigEndian.Uint64(hdr[5:13])
	if n > 9 {
		msg = make([]byte, n-9)
		if _, err := io.ReadFull(r, msg); err != nil {
			return 0, 0, nil, err
		}
	}
	return typ, id, msg, nil
}

// frameReader reads frames a piece at a time: a read that fails with a
// temporary error (a connection with nothing more to read yet: the
// poller's) leaves what it had read in place, and the next call goes on
// from there.
type frameReader struct {
	hdr [headerLen]byte
	hn  int    // bytes of hdr read
	msg []byte // the message being read, once its header is
	mn  int    // bytes of msg read
}

// next returns the next frame of at most max bytes after its header, or
// the error that stopped it.
func (f *frameReader) next(r io.Reader, max uint32) (typ byte, id uint64, msg []byte, err error) {
	for f.hn < headerLen {
		n, err := r.Read(f.hdr[f.hn:])
		f.hn += n
		if f.hn < headerLen && err != nil {
			if f.hn > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, nil, err
		}
	}
	n := binary.BigEndian.Uint32(f.hdr[0:4])
	if n < 9 {
		return 0, 0, nil, fmt.Errorf("link: frame length %d is shorter than its header", n)
	}
	if n-9 > max {
		return 0, 0, nil, fmt.Errorf("link: a frame of %d bytes; at most %d are taken", n-9, max)
	}
	if n > 9 && f.msg == nil {
		f.msg = make([]byte, n-9)
	}
	for f.mn < len(f.msg) {
		m, err := r.Read(f.msg[f.mn:])
		f.mn += m
		if f.mn < len(f.msg) && err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, nil, err
		}
	}
	typ, id, msg = f.hdr[4], binary.BigEndian.Uint64(f.hdr[5:13]), f.msg
	f.hn, f.msg, f.mn = 0, nil, 0
	return typ, id, msg, nil
}

package httpapi

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn serves a handler over mutual TLS as a daemon does (serveTLS)
// and returns a client connection with an agent's certificate that
// negotiated h2, its preface and SETTINGS sent, and a framer on it.
func h2Conn(t *testing.T) *http2.Framer {
	t.Helper()
	addr, _, client := serveTLS(t, okHandler(), Limits{})
	cfg := client.Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr
}

// writeGET sends GET / on stream, its headers (and extra) encoded by enc.
func writeGET(t *testing.T, fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, stream uint32, extra ...hpack.HeaderField) {
	t.Helper()
	hb.Reset()
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: "127.0.0.1"}, {Name: ":path", Value: "/"}}, extra...) {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// TestHTTP2TablesAreSmall: the server's own header compression table (the
// one its responses fill, kept by both ends of each connection) holds
// hpackTableSize bytes, no header: a response's header block begins by
// setting it so.
func TestHTTP2TablesAreSmall(t *testing.T) {
	fr := h2Conn(t)
	var hb bytes.Buffer
	writeGET(t, fr, hpack.NewEncoder(&hb), &hb, 1)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the response: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			// A representation's first byte: 001xxxxx is a table size
			// update (its size in the low 5 bits when under 31), 01xxxxxx
			// a field added to the table.
			b := f.HeaderBlockFragment()
			if len(b) == 0 || b[0]&0xe0 != 0x20 {
				t.Fatalf("the response's header block %x does not begin with a table size update", b)
			}
			if size := b[0] & 0x1f; size > hpackTableSize {
				t.Errorf("the response sets its table to %d bytes, want at most %d", size, hpackTableSize)
			}
			d := hpack.NewDecoder(4096, nil)
			d.SetEmitFunc(func(hpack.HeaderField) {})
			if _, err := d.Write(b); err != nil {
				t.Fatalf("the response's header block: %v", err)
			}
			return
		case *http2.GoAwayFrame:
			t.Fatalf("the server went away: %v", f.ErrCode)
		}
	}
}

// A client may send requests before it has read the server's SETTINGS,
// its header table at HTTP/2's default (4 KB) until the server's setting
// is acknowledged (RFC 9113, 6.5.3): the second here refers to a header
// the first added to that table. Both are answered. A server that applied
// a smaller table of its own at once went away with COMPRESSION_ERROR
// (the chaos suite's clients, reconnecting after a leader's kill, met it).
func TestHTTP2RequestsBeforeTheServersSettingsAreRead(t *testing.T) {
	fr := h2Conn(t)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb) // HTTP/2's default table: 4 KB
	token := hpack.HeaderField{Name: "x-drover-token", Value: strings.Repeat("t", 64)}
	for _, stream := range []uint32{1, 3} {
		writeGET(t, fr, enc, &hb, stream, token)
	}
	answered := map[uint32]bool{}
	for len(answered) < 2 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answers (%d of 2 so far): %v", len(answered), err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			answered[f.StreamID] = true
		case *http2.GoAwayFrame:
			t.Fatalf("the server went away after %d of 2 answers: %v", len(answered), f.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("the server reset stream %d: %v", f.StreamID, f.ErrCode)
		}
	}
}

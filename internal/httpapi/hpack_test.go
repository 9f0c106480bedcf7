package httpapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestHTTP2TablesAreSmall: a TLS server speaks HTTP/2 and tells each
// connection that its header compression table holds hpackTableSize
// bytes, no header at all (HTTP/2's default is 4 KB, kept per connection
// on both sides).
func TestHTTP2TablesAreSmall(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, okHandler(), Limits{TLS: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })

	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{NextProtos: []string{"h2"}, InsecureSkipVerify: true}) // our own certificate, just made
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's settings: %v", err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		v, ok := sf.Value(http2.SettingHeaderTableSize)
		if !ok || v != hpackTableSize {
			t.Errorf("the server's SETTINGS_HEADER_TABLE_SIZE: %d (sent: %v), want %d", v, ok, hpackTableSize)
		}
		return
	}
}

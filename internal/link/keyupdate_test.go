package link

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/pki"
)

// syncBuffer is a buffer a process writes and the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) has(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.b.Bytes(), p)
}

// A TLS 1.3 KeyUpdate from the client (one requesting the server's, one
// not) is taken as it comes between frames, the server's reads not
// waiting: the frames after it are read and answered. Go's client sends
// no KeyUpdate; OpenSSL's s_client does ("K", "k").
func TestKeyUpdatesBetweenFramesAreTaken(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is required with CI=true (.ci/run installs it)")
		}
		t.Skip("no openssl (OpenSSL's s_client sends the KeyUpdates)")
	}
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	srvCfg, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	srvCfg.NextProtos = []string{Proto}
	srvCfg.ClientAuth = tls.VerifyClientCertIfGiven
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := &Server{Handler: http.NotFoundHandler(), WriteTimeout: 5 * time.Second}
	defer s.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(WrapConn(c), srvCfg)
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if tc.Handshake() != nil {
					c.Close()
					return
				}
				c.SetDeadline(time.Time{})
				s.ServeConn(tc)
			}()
		}
	}()
	f := pki.DirFiles(dir, pki.RoleAgent)
	cmd := exec.Command("openssl", "s_client", "-connect", ln.Addr().String(), "-tls1_3", "-alpn", Proto,
		"-cert", f.Cert, "-key", f.Key, "-CAfile", f.CA, "-servername", pki.ServerName)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	waitFor(t, "s_client's handshake", func() bool { return out.has([]byte("drover-link/1")) || out.has([]byte("Verify return code")) })
	time.Sleep(200 * time.Millisecond)
	ping := func(id uint64) {
		t.Helper()
		if _, err := stdin.Write(appendFrame(nil, framePing, id, nil)); err != nil {
			t.Fatal(err)
		}
		pong := appendFrame(nil, framePong, id, nil)
		for deadline := time.Now().Add(5 * time.Second); !out.has(pong); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no pong to ping %#x within 5s; s_client said: %s", id, errOut.b.String())
			}
		}
	}
	ping(0x0101010101010101)
	for i, cmdLetter := range []string{"K\n", "k\n", "K\n"} {
		io.WriteString(stdin, cmdLetter)
		time.Sleep(100 * time.Millisecond)
		ping(0x0202020202020202 + uint64(i))
	}
	if !errOut.has([]byte("KEYUPDATE")) {
		t.Errorf("s_client sent no KeyUpdate: %s", errOut.b.String())
	}
}

package agent_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/server"
)

// TestServerFetchesUsageFromAgentOverTLS: with TLS on, as drover server
// and drover agent run by default (each its own listener and certificate),
// GET /v1/nodes/{id}/usage reaches the agent with the server's certificate
// and answers what the agent measures (drover nodes and status show it).
func TestServerFetchesUsageFromAgentOverTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	files := func(role string) pki.Files { return pki.DirFiles(dir, role) }
	clientTLS := func(role, name string) *tls.Config {
		cfg, err := pki.ClientConfig(files(role), name)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	serve := func(role string) *tls.Config {
		cfg, err := pki.ServerConfig(files(role))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}

	ctx, cancel := context.WithCancel(context.Background())
	quiet := testLogger(t, slog.LevelWarn)
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), quiet)
	if err != nil {
		cancel()
		emb.Close()
		t.Fatal(err)
	}
	srv := server.New(server.Config{Registry: reg, ID: "test", Logger: quiet, AgentTLS: clientTLS(pki.RoleServer, pki.AgentName)})
	srvDone := make(chan struct{})
	go func() { srv.Run(ctx); close(srvDone) }()
	srvLn := listen()
	srvTLS := serve(pki.RoleServer)
	srvTLS.ClientAuth = tls.VerifyClientCertIfGiven // as drover server serves
	hs := httpapi.Serve(srvLn, srv.Handler(nil), httpapi.Limits{TLS: srvTLS}, quiet)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-srvDone
		reg.Close()
		emb.Close()
	})
	srvAddr := []string{"https://" + srvLn.Addr().String()}

	agentClient, err := client.NewWithOptions(srvAddr, client.Options{TLS: clientTLS(pki.RoleAgent, pki.ServerName)})
	if err != nil {
		t.Fatal(err)
	}
	agentLn := listen()
	ag, err := agent.New(agent.Config{
		DataDir: t.TempDir(), Name: "node-1", Address: "https://" + agentLn.Addr().String(),
		Drivers: []driver.Driver{execdriver.New("raw_exec")},
		Client:  agentClient, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	as := httpapi.Serve(agentLn, ag.Handler(), httpapi.Limits{TLS: serve(pki.RoleAgent)}, quiet)
	actx, acancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(actx) }()
	t.Cleanup(func() {
		acancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("agent Run did not return within 20s of cancel")
		}
		as.Close()
	})

	cli, err := client.NewWithOptions(srvAddr, client.Options{TLS: clientTLS(pki.RoleCLI, pki.ServerName)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node registration", func() bool {
		_, err := cli.Node(context.Background(), ag.NodeID())
		return err == nil
	})
	uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ucancel()
	u, err := cli.NodeUsage(uctx, ag.NodeID())
	if err != nil {
		t.Fatalf("GET /v1/nodes/%s/usage under TLS: %v", ag.NodeID(), err)
	}
	if u.NodeID != ag.NodeID() || u.Time.IsZero() {
		t.Fatalf("usage = %+v, want the agent's measure of node %s", u, ag.NodeID())
	}
}

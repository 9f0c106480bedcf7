// Package dockertest gives tests a Docker daemon and the test image: a
// FROM scratch image holding only a static build of internal/testapp. No
// registry is reachable from the test machines, so the image is built
// locally, through the Engine API (no docker CLI needed).
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// ImageRepo is the test image's repository; its tag is ImageTag of the
// testapp binary, so a changed testapp makes a new image.
const ImageRepo = "drover-testapp"

// Dockerfile builds the test image from a context holding the testapp
// binary as "testapp" (docker build works as well as the API does).
const Dockerfile = "FROM scratch\nCOPY testapp /testapp\nENTRYPOINT [\"/testapp\"]\n"

// ImageTag is the full image name for a testapp binary: ImageRepo and the
// start of the binary's SHA-256.
func ImageTag(binary []byte) string {
	sum := sha256.Sum256(binary)
	return ImageRepo + ":" + hex.EncodeToString(sum[:6])
}

// Require returns a client of the local daemon (DOCKER_HOST or the default
// socket). It skips the test when no daemon answers, and fails it instead
// when CI=true, where a daemon is part of the setup.
func Require(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		msg := "docker: no daemon answers (" + strings.SplitN(err.Error(), "\n", 2)[0] + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var image struct {
	mu  sync.Mutex
	tag string
}

// Image returns the test image's name, building it if the daemon does not
// have it: once per process.
func Image(t testing.TB) string {
	t.Helper()
	c := Require(t)
	image.mu.Lock()
	defer image.mu.Unlock()
	if image.tag != "" {
		return image.tag
	}
	tag, err := build(c)
	if err != nil {
		t.Fatalf("dockertest: building the test image: %v", err)
	}
	image.tag = tag
	return tag
}

func build(c *client.Client) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the drover module (go env GOMOD is empty)")
	}
	dir, err := os.MkdirTemp("", "dockertest")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "testapp")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./internal/testapp")
	cmd.Dir = filepath.Dir(gomod)
	// Static, so that it runs in an image with nothing else in it.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./internal/testapp: %v\n%s", err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	tag := ImageTag(binary)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", err
	}

	var tctx bytes.Buffer
	tw := tar.NewWriter(&tctx)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(Dockerfile)}, {"testapp", 0o755, binary}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	res, err := c.ImageBuild(ctx, &tctx, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer res.Body.Close()
	// The build's outcome is in its message stream: an error is a message.
	dec := json.NewDecoder(res.Body)
	for {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("image build: reading progress: %w", err)
		}
		if m.Error != "" {
			return "", fmt.Errorf("image build: %s", m.Error)
		}
	}
	return tag, nil
}

package main

// drover-bench docker: a container's start through drover against a plain
// `docker run` of the same image, in the same run.
//
//	go run ./cmd/drover-bench docker              # 10 rounds
//	go run ./cmd/drover-bench docker -rounds 30
//
// It builds internal/testapp into a FROM scratch image (no registry is
// needed), starts `drover dev`, and then, each round, one after the other:
//
//   - drover: submits a job of one docker instance of the image (a mapped
//     port, 64 MB, 100 MHz) and times submit -> running as the agent
//     recorded it (the container started), and submit -> running as the
//     API shows it; then stops the job and waits until the container is
//     gone;
//   - docker run: `docker run -d` of the same image with the same port
//     mapping, memory and cpu shares, timed until it returns (the
//     container started, as `docker run -d` does), then removed.
//
// The ratio is p50 drover (agent-recorded) / p50 docker run; issue 6's
// target is <= 1.25. The docker CLI is the baseline, as the issue names it,
// and the bench talks to Docker only through it: the Docker API client is
// the docker driver's alone.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "docker", about: "a docker task's start through drover against `docker run` of the same image", flags: dockerFlags})
}

const dockerTarget = 1.25

func dockerFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	rounds := fs.Int("rounds", 10, "starts to time each way (-quick: 3)")
	return func() (*report, error) {
		return dockerBench(o.drover, sized(fs, o, "rounds", *rounds, 3))
	}
}

func dockerBench(bin string, rounds int) (*report, error) {
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return nil, &unavailableError{fmt.Sprintf("no Docker engine answers (%s): install docker.io and start dockerd", strings.TrimSpace(string(out)))}
	}
	tmp, err := os.MkdirTemp("", "drover-bench-docker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	image, err := buildTestImage(tmp)
	if err != nil {
		return nil, err
	}
	c, _, stop, err := devNode(bin, filepath.Join(tmp, "data"), "--dns-addr", "")
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nodes, _, err := c.Nodes(ctx, nil)
	if err != nil {
		return nil, err
	}
	if !nodes[0].HasDriver("docker") {
		return nil, fmt.Errorf("drover dev's node has no docker driver (drivers %v): see its log", nodes[0].Drivers)
	}

	var started, seen, plain []time.Duration
	for r := 0; r < rounds; r++ {
		st, sn, err := dockerThroughDrover(ctx, c, fmt.Sprintf("bench-docker-%d", r), image)
		if err != nil {
			return nil, err
		}
		started, seen = append(started, st), append(seen, sn)
		p, err := plainDockerRun(image)
		if err != nil {
			return nil, err
		}
		plain = append(plain, p)
	}
	ratio := float64(quantile(sortedCopy(started), 0.5)) / float64(quantile(sortedCopy(plain), 0.5))
	rep := newReport("docker")
	rep.linef("drover-bench docker: %d rounds, image %s (FROM scratch), one instance each, drover dev", rounds, image)
	rep.linef("drover: submit -> container started   %s", dist(started))
	rep.linef("drover: submit -> running in the API  %s", dist(seen))
	rep.linef("docker run -d                         %s", dist(plain))
	rep.linef("p50 drover (container started) / p50 docker run = %.2f (target <= %.2f: %s)", ratio, dockerTarget, verdict(ratio <= dockerTarget))
	rep.set("rounds", rounds)
	rep.set("ratio_to_docker_run", ratio)
	rep.setDist("submit_to_started", started)
	rep.setDist("submit_to_running_seen", seen)
	rep.setDist("docker_run", plain)
	return rep, nil
}

// buildTestImage builds internal/testapp, statically, into a FROM scratch
// image tagged by the binary's hash, and returns the tag.
func buildTestImage(dir string) (string, error) {
	ctxDir := filepath.Join(dir, "image")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		return "", err
	}
	b := exec.Command("go", "build", "-o", filepath.Join(ctxDir, "testapp"), "github.com/drover-org/drover/internal/testapp")
	b.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := b.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building internal/testapp: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(ctxDir, "testapp"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bin)
	tag := "drover-testapp:" + hex.EncodeToString(sum[:6])
	dockerfile := "FROM scratch\nCOPY testapp /testapp\nENTRYPOINT [\"/testapp\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, ctxDir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build: %v\n%s", err, out)
	}
	return tag, nil
}

// dockerThroughDrover runs one instance of image as a job and returns
// submit -> started (the agent's record) and submit -> running as the API
// shows it; it then stops and purges the job and waits for its container
// to go.
func dockerThroughDrover(ctx context.Context, c *client.Client, name, image string) (started, seen time.Duration, err error) {
	job := &spec.Job{Name: name, Groups: []*spec.Group{{
		Name: "g", Count: 1,
		Network: &spec.Network{Ports: []spec.Port{{Label: "http", To: 8080}}},
		Tasks: []*spec.Task{{
			Name: "t", Driver: "docker",
			Config:    spec.TaskConfig{Image: image, Args: []string{"-listen", ":8080"}, Ports: []string{"http"}},
			Resources: spec.Resources{CPU: 100, MemoryMB: 64},
		}},
	}}}
	job.Canonicalize()
	t0 := time.Now()
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return 0, 0, err
	}
	var index int64
	for started == 0 {
		st, idx, err := c.Job(ctx, name, &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			return 0, 0, err
		}
		index = idx
		if len(st.Failures) > 0 {
			return 0, 0, fmt.Errorf("job %s cannot be placed: %s", name, st.Failures[0].String())
		}
		for _, a := range st.Allocations {
			ts := (*spec.TaskState)(nil)
			if a.Status != nil {
				ts = a.Status.Tasks["t"]
			}
			switch {
			case a.ClientStatusOr() == spec.ClientFailed:
				return 0, 0, fmt.Errorf("job %s failed: %s", name, a.Status.Description)
			case ts != nil && ts.State == spec.TaskRunning:
				seen, started = time.Since(t0), ts.StartedAt.Sub(t0)
			}
		}
	}
	if _, err := c.StopJob(ctx, name, true); err != nil {
		return 0, 0, err
	}
	for {
		allocs, idx, err := c.Allocs(ctx, name, "", &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			return 0, 0, err
		}
		index = idx
		if len(allocs) == 0 {
			break
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=drover.job="+name).Output()
		if err == nil && len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("the container of job %s is still there 30s after the job was stopped", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return started, seen, nil
}

// plainDockerRun times `docker run -d` of image with the drover run's
// port mapping, memory and cpu shares, then removes the container.
func plainDockerRun(image string) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	t0 := time.Now()
	out, err := exec.Command("docker", "run", "-d",
		"-p", "127.0.0.1:"+strconv.Itoa(port)+":8080", "--memory", "64m", "--cpu-shares", "100",
		image, "-listen", ":8080").CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("docker run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	if out, err := exec.Command("docker", "rm", "-f", id).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("docker rm: %v\n%s", err, out)
	}
	return d, nil
}

package chaos

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// proc is a process the suite starts, kills, pauses and starts again on
// the same arguments (data dir, addresses).
type proc struct {
	name  string
	args  func() []string // built at each start: an address learnt at the first start is reused
	ready *regexp.Regexp  // a line that says it started (nil: none awaited)
	logf  *os.File

	cmd    *exec.Cmd
	done   chan struct{}
	match  []string // ready's submatches at the first start
	paused bool
}

// start runs the process and waits, up to a minute, for its ready line.
func (p *proc) start() error {
	args := p.args()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = cleanEnv()
	// Its own process group: a stop of the suite's reaches no task.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = p.logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done, p.paused = cmd, make(chan struct{}), false
	ready := make(chan []string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(p.logf, sc.Text())
			if p.ready != nil {
				if m := p.ready.FindStringSubmatch(sc.Text()); m != nil {
					select {
					case ready <- m:
					default:
					}
				}
			}
		}
	}()
	go func() { <-scanned; cmd.Wait(); close(p.done) }()
	if p.ready == nil {
		return nil
	}
	select {
	case m := <-ready:
		if p.match == nil {
			p.match = m
		}
		return nil
	case <-p.done:
		return fmt.Errorf("%s exited while starting; see %s", p.name, p.logf.Name())
	case <-time.After(time.Minute):
		p.kill()
		return fmt.Errorf("%s did not start within a minute; see %s", p.name, p.logf.Name())
	}
}

// running reports whether the process is started and has not exited.
func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the process and waits for it (and resumes it first if
// paused, so that nothing is left stopped).
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.cmd.Process.Kill()
	if p.paused {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	p.paused = false
}

func (p *proc) pause() {
	if p.running() {
		p.cmd.Process.Signal(syscall.SIGSTOP)
		p.paused = true
	}
}

func (p *proc) resume() {
	if p.running() && p.paused {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

// cleanEnv is the environment without ETCD_* (etcd reads its flags from
// those) and DROVER_* (a user's address or token must not leak in).
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ETCD") && !strings.HasPrefix(e, "DROVER_") {
			env = append(env, e)
		}
	}
	return env
}

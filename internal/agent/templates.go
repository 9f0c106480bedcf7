package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// templater renders a task's templates (spec.Template) into its directory
// before each start, and again whenever a service they read changes in
// the catalog, applying their change_mode then. A task without templates
// has none. Its watchers (one goroutine per service read, blocking queries
// on the server's catalog) run from the first rendering until the alloc is
// done or the agent goes away.
type templater struct {
	tr *taskRunner

	mu sync.Mutex // serializes renderings; guards the fields below
	// content is each template's last rendering, by index.
	content []string
	// env holds the variables of the env = true templates.
	env map[string]string
	// cache holds, by service, the instances last read; watched the
	// services with a watcher.
	cache   map[string][]spec.TemplateService
	watched map[string]bool
	ctx     context.Context // the watchers'; nil before the first rendering

	// restart carries a restart a change asked for to supervise.
	restart chan string
	// restarted is set when the task's last run ended for such a
	// restart; only the task's run goroutine uses it.
	restarted bool
}

// newTemplaters makes the templaters of an alloc's tasks that have
// templates, by task name.
func newTemplaters(tasks []*spec.Task) map[string]*templater {
	var out map[string]*templater
	for _, t := range tasks {
		if len(t.Templates) == 0 {
			continue
		}
		if out == nil {
			out = map[string]*templater{}
		}
		out[t.Name] = &templater{content: make([]string, len(t.Templates)), cache: map[string][]spec.TemplateService{},
			watched: map[string]bool{}, restart: make(chan string, 1)}
	}
	return out
}

func (tr *taskRunner) templater() *templater { return tr.ar.templaters[tr.task.Name] }

// renderTemplates renders the task's templates before a start. A failure
// (a template that does not render, a source that cannot be read) fails
// the start.
func (tr *taskRunner) renderTemplates(ctx context.Context) error {
	tm := tr.templater()
	if tm == nil {
		return nil
	}
	if err := tr.makeDirs(); err != nil {
		return err
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.ctx == nil {
		tm.ctx = tr.watchContext(ctx)
	}
	_, err := tm.renderLocked(true)
	return err
}

// watchContext is a context that ends when the alloc is done or ctx (the
// agent's task context) ends.
func (tr *taskRunner) watchContext(ctx context.Context) context.Context {
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-tr.ar.done:
		case <-wctx.Done():
		}
		cancel()
	}()
	return wctx
}

// templateEnv is what the env = true templates set, for the task's
// environment.
func (tr *taskRunner) templateEnv() map[string]string {
	tm := tr.ar.templaters[tr.task.Name]
	if tm == nil {
		return nil
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return maps.Clone(tm.env)
}

// templateRestarts yields a restart a template change asks for; nil (never)
// for a task without templates.
func (tr *taskRunner) templateRestarts() <-chan string {
	if tm := tr.ar.templaters[tr.task.Name]; tm != nil {
		return tm.restart
	}
	return nil
}

// restartedForTemplate reports, once, that the task's last run ended for a
// template's change_mode restart: it starts again at once, not counted
// by the restart policy.
func (tr *taskRunner) restartedForTemplate() bool {
	tm := tr.ar.templaters[tr.task.Name]
	if tm == nil || !tm.restarted {
		return false
	}
	tm.restarted = false
	return true
}

// renderLocked renders every template and writes those whose rendering
// changed (all of them at a start), returning their indexes. fetch reads
// the services the templates name afresh, as at a start; otherwise the
// watchers' cache serves. Called with mu held.
func (tm *templater) renderLocked(fetch bool) ([]int, error) {
	tr := tm.tr
	rt := tr.runtime()
	env := rt.Env()
	host := rt
	host.Dirs = tr.hostDirs()
	fetched := map[string]bool{}
	var ferr error
	data := spec.TemplateData{
		Lookup: func(name string) (string, bool) {
			ref := "${" + name + "}"
			v := rt.Interpolate(ref, env)
			return v, v != ref
		},
		Service: func(name string) ([]spec.TemplateService, error) {
			if _, ok := tm.cache[name]; (fetch && !fetched[name]) || !ok {
				insts, err := tm.fetch(name)
				if err != nil {
					ferr = err
					return nil, err
				}
				tm.cache[name], fetched[name] = insts, true
			}
			tm.watch(name)
			return tm.cache[name], nil
		},
		Services: func() ([]spec.TemplateServiceName, error) {
			ctx, cancel := context.WithTimeout(tm.ctx, 10*time.Second)
			defer cancel()
			sums, _, err := tr.ar.agent.client.Services(ctx, nil)
			out := make([]spec.TemplateServiceName, 0, len(sums))
			for _, s := range sums {
				out = append(out, spec.TemplateServiceName{Name: s.Name, Tags: s.Tags})
			}
			return out, err
		},
	}
	newEnv := map[string]string{}
	var changed []int
	for i, tp := range tr.task.Templates {
		what := fmt.Sprintf("template %d (%s)", i+1, tp.Destination)
		text := tp.Data
		if tp.Source != "" {
			src := rt.Interpolate(tp.Source, env)
			if !filepath.IsAbs(src) {
				src = filepath.Join(tr.dir, src)
			}
			b, err := os.ReadFile(src)
			if err != nil {
				return nil, fmt.Errorf("%s: cannot read its source: %w", what, err)
			}
			text = string(b)
		}
		out, err := tp.Render(text, data)
		if err != nil {
			if ferr != nil {
				err = ferr
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if tp.Env {
			vars, err := spec.ParseEnvFile(out)
			if err != nil {
				return nil, fmt.Errorf("%s: env = true, but the rendering is not KEY=value lines: %w", what, err)
			}
			for k, v := range vars {
				if !strings.HasPrefix(k, "DROVER_") {
					newEnv[k] = v
				}
			}
		}
		if !fetch && out == tm.content[i] {
			continue
		}
		path, err := tr.templatePath(host.Interpolate(tp.Destination, host.Env()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := writeFileAtomic(path, out, os.FileMode(tp.FileMode())); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if out != tm.content[i] {
			changed = append(changed, i)
		}
		tm.content[i] = out
	}
	tm.env = newEnv
	return changed, nil
}

// fetch reads the healthy instances of service name from the catalog; an
// unknown service has none.
func (tm *templater) fetch(name string) ([]spec.TemplateService, error) {
	ctx, cancel := context.WithTimeout(tm.ctx, 10*time.Second)
	defer cancel()
	insts, _, err := tm.tr.ar.agent.client.Service(ctx, name, false, nil)
	if client.IsStatus(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading service %s from the catalog: %w", name, err)
	}
	return templateServices(insts), nil
}

func templateServices(insts []spec.ServiceInstance) []spec.TemplateService {
	out := make([]spec.TemplateService, 0, len(insts))
	for _, in := range insts {
		out = append(out, spec.TemplateService{ID: in.AllocID + "-" + in.Task, Name: in.Service, Address: in.Address,
			Port: in.Port, Tags: in.Tags, Node: in.NodeName, NodeID: in.NodeID, Job: in.Job, AllocID: in.AllocID})
	}
	return out
}

// watch starts, once per service, a watcher that follows the service in
// the catalog with blocking queries and renders the templates again when
// its instances change. Called with mu held.
func (tm *templater) watch(name string) {
	if tm.watched[name] {
		return
	}
	tm.watched[name] = true
	go func() {
		var index int64
		fails := 0
		for tm.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(tm.ctx, templateWatchWait+30*time.Second)
			insts, idx, err := tm.tr.ar.agent.client.Service(ctx, name, false, &client.QueryOptions{Index: index, Wait: templateWatchWait})
			cancel()
			if client.IsStatus(err, http.StatusNotFound) {
				// None yet: the answer's index makes the next query
				// wait for the service to appear.
				insts, err = nil, nil
			}
			if err != nil {
				fails++
				select {
				case <-time.After(min(time.Duration(fails)*time.Second, 30*time.Second)):
				case <-tm.ctx.Done():
				}
				continue
			}
			fails = 0
			if idx == 0 {
				// A server that gives no index cannot block: poll.
				select {
				case <-time.After(time.Second):
				case <-tm.ctx.Done():
				}
			}
			if idx == index && idx != 0 {
				continue
			}
			index = idx
			tm.changed(name, templateServices(insts))
		}
	}()
}

// templateWatchWait is how long one blocking query of a watcher waits.
const templateWatchWait = 5 * time.Minute

// changed takes a service's new instances: when they differ from the
// cache, the templates are rendered again, and those whose rendering
// changed get their change_mode.
func (tm *templater) changed(name string, insts []spec.TemplateService) {
	tm.mu.Lock()
	if old, ok := tm.cache[name]; ok && slices.EqualFunc(old, insts, func(a, b spec.TemplateService) bool {
		return a.ID == b.ID && a.Address == b.Address && a.Port == b.Port && slices.Equal(a.Tags, b.Tags)
	}) {
		tm.mu.Unlock()
		return
	}
	tm.cache[name] = insts
	changed, err := tm.renderLocked(false)
	tm.mu.Unlock()
	tr := tm.tr
	if err != nil {
		tr.ar.taskEvent(tr.task.Name, spec.EventTemplate, "rendering again after service "+name+" changed: "+err.Error(), nil)
		return
	}
	var restart []string
	for _, i := range changed {
		tp := tr.task.Templates[i]
		switch tp.ChangeModeOf() {
		case spec.ChangeRestart:
			restart = append(restart, tp.Destination)
		case spec.ChangeSignal:
			tr.ar.taskEvent(tr.task.Name, spec.EventTemplate, fmt.Sprintf("%s rendered again (service %s changed); %s", tp.Destination, name, tm.signal(tp.ChangeSignal)), nil)
		case spec.ChangeNoop:
			tr.ar.taskEvent(tr.task.Name, spec.EventTemplate, fmt.Sprintf("%s rendered again (service %s changed); change_mode noop", tp.Destination, name), nil)
		}
	}
	if len(restart) > 0 {
		why := fmt.Sprintf("%s rendered again (service %s changed)", strings.Join(restart, ", "), name)
		select {
		case tm.restart <- why:
		default: // a restart is already asked for
		}
	}
}

// signal sends the running task sig, and says what happened.
func (tm *templater) signal(sig string) string {
	tr := tm.tr
	h := tr.ar.agent.usage.handle(tr.ar.alloc.ID, tr.task.Name)
	s, ok := h.(driver.Signaler)
	switch {
	case h == nil:
		return "the task is not running: not signalled"
	case !ok:
		return "driver " + tr.task.Driver + " cannot signal its tasks"
	}
	if err := s.Signal(unix.SignalNum(sig)); err != nil {
		return "sending " + sig + ": " + err.Error()
	}
	return "sent " + sig
}

// templatePath is where a destination dest (interpolated with the host's
// directories) goes: inside the task's directory, or the alloc's shared
// one. Symbolic links are followed only within that directory.
func (tr *taskRunner) templatePath(dest string) (string, error) {
	root, rel, err := tr.destRoot(dest)
	if err != nil {
		return "", err
	}
	return securejoin.SecureJoin(root, rel)
}

// destRoot splits a destination dest (interpolated with the host's
// directories; a relative one is from the task's directory, so Nomad's
// "../alloc/x" is the alloc's shared directory) into the directory it must
// stay in, the task's or the alloc's shared one, and its path relative to
// that directory.
func (tr *taskRunner) destRoot(dest string) (root, rel string, err error) {
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(tr.dir, dest)
	}
	root, rel = tr.dir, dest
	if shared := tr.ar.sharedDir(); dest == shared || strings.HasPrefix(dest, shared+"/") {
		root, rel = shared, strings.TrimPrefix(strings.TrimPrefix(dest, shared), "/")
	} else if filepath.IsAbs(dest) {
		r, err := filepath.Rel(tr.dir, dest)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "", "", fmt.Errorf("destination %s is outside the task's directory", dest)
		}
		rel = r
	}
	return root, rel, nil
}

// hostDirs are the task's directories as the agent sees them, whatever
// the driver shows the task.
func (tr *taskRunner) hostDirs() spec.TaskDirs {
	return spec.TaskDirs{
		DroverAlloc: tr.ar.dir, Alloc: tr.ar.sharedDir(), Task: tr.dir,
		Local: filepath.Join(tr.dir, localDirName), Secrets: filepath.Join(tr.dir, secretsDirName),
	}
}

// writeFileAtomic writes content to path through a temporary file renamed
// over it, so that the task never reads half a file; the rename replaces
// a symbolic link rather than following it.
func writeFileAtomic(path, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".template-*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	err = errors.Join(err, f.Chmod(mode), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

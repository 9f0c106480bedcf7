package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	getter "github.com/hashicorp/go-getter/v2"

	"github.com/drover-org/drover/internal/spec"
)

// A task's artifacts (spec.Artifact) are fetched with go-getter, the
// library Nomad fetches them with, limited to its http(s) and file
// getters. Each is fetched into a fresh staging directory inside the
// alloc's directory, where go-getter unpacks an archive (refusing entries
// with ".."; a symbolic link in a tar becomes an empty file, never a
// link), and then copied into its destination through an os.Root on the
// task's (or the alloc's shared) directory: no path, and no symbolic link
// the task left there, leads the copy outside it.

// Artifact limits, as Nomad's client defaults.
const (
	// DefaultArtifactTimeout bounds each artifact's fetch.
	DefaultArtifactTimeout = 30 * time.Minute
	// DefaultArtifactMaxBytes bounds an http(s) download and what an
	// archive unpacks to.
	DefaultArtifactMaxBytes = 100 << 30
	// artifactMaxFiles bounds how many files an archive unpacks to.
	artifactMaxFiles = 4096
)

// artifactError is an artifact that could not be fetched: its source as
// an event may show it (redacted), why, and whether trying again could
// help.
type artifactError struct {
	n, of  int // which artifact of the task's, from 1
	source string
	err    error
	// final: the server answered 4xx (but 408 and 429): the same request
	// will get the same answer, so the task fails without restarts.
	final bool
}

func (e *artifactError) Error() string {
	return fmt.Sprintf("artifact %d of %d (%s): %v", e.n, e.of, e.source, e.err)
}

func (e *artifactError) Unwrap() error { return e.err }

// fetchArtifacts fetches the task's artifacts before its first start in
// this alloc; a restart in place finds them where they were put and does
// not fetch them again. stop ends a fetch under way (errStopRequested).
func (tr *taskRunner) fetchArtifacts(ctx context.Context, stop <-chan struct{}) error {
	if len(tr.task.Artifacts) == 0 || tr.artifactsFetched {
		return nil
	}
	if err := tr.makeDirs(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-stop:
			cancel(errStopRequested)
		case <-ctx.Done():
		}
	}()
	var srcs []string
	for i, a := range tr.task.Artifacts {
		src, err := tr.fetchArtifact(ctx, a)
		if c := context.Cause(ctx); errors.Is(c, errStopRequested) {
			return c
		}
		if ae, ok := err.(*artifactError); ok {
			ae.n, ae.of = i+1, len(tr.task.Artifacts)
		}
		if err != nil {
			return err
		}
		srcs = append(srcs, src)
	}
	tr.artifactsFetched = true
	tr.ar.taskEvent(tr.task.Name, spec.EventArtifacts, "fetched "+strings.Join(srcs, ", "), nil)
	return nil
}

// fetchArtifact fetches one artifact into its destination, returning its
// source as an event shows it.
func (tr *taskRunner) fetchArtifact(ctx context.Context, a *spec.Artifact) (string, error) {
	rt := tr.runtime()
	env := rt.Env()
	host := rt
	host.Dirs = tr.hostDirs()
	src := rt.Interpolate(a.Source, env)
	shown, secrets := redactURL(src)
	fail := func(err error) (string, error) {
		return shown, &artifactError{source: shown, err: errors.New(secrets.Replace(err.Error()))}
	}
	if msg := spec.ArtifactSourceProblem(src); msg != "" {
		return fail(errors.New(msg))
	}
	u, err := url.Parse(src)
	if err != nil {
		return fail(err)
	}
	if strings.HasPrefix(src, "/") {
		u = &url.URL{Scheme: "file", Path: src}
	}
	mode := a.ModeOf()
	q := u.Query()
	for k, v := range a.Options {
		q.Set(k, rt.Interpolate(v, env))
	}
	if mode == spec.ArtifactFile && !q.Has("archive") {
		q.Set("archive", "false") // the file as it is, as the mode says
	}
	u.RawQuery = q.Encode()

	rootDir, rel, err := tr.destRoot(filepath.Clean(host.Interpolate(a.DestinationOf(), host.Env())))
	if err != nil {
		return fail(err)
	}

	stage, err := os.MkdirTemp(tr.ar.dir, ".artifact-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(stage)
	out := filepath.Join(stage, "out")

	cfg := tr.ar.agent.cfg
	timeout := cmpDuration(cfg.ArtifactTimeout, DefaultArtifactTimeout)
	maxBytes := cfg.ArtifactMaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultArtifactMaxBytes
	}
	rec := &artifactTransport{next: http.DefaultTransport, max: maxBytes}
	header := http.Header{}
	for k, v := range a.Headers {
		header.Set(k, rt.Interpolate(v, env))
	}
	c := &getter.Client{
		Getters: []getter.Getter{
			&getter.HttpGetter{Client: &http.Client{Transport: rec}, Header: header,
				DoNotCheckHeadFirst: true, XTerraformGetDisabled: true},
			&getter.FileGetter{},
		},
		Decompressors:   getter.LimitedDecompressors(artifactMaxFiles, maxBytes),
		DisableSymlinks: true,
	}
	getMode := map[string]getter.Mode{spec.ArtifactAny: getter.ModeAny, spec.ArtifactFile: getter.ModeFile, spec.ArtifactDir: getter.ModeDir}[mode]
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = c.Get(fctx, &getter.Request{Src: u.String(), Dst: out, GetMode: getMode, Copy: true, DisableSymlinks: true})
	if err != nil {
		var ce *getter.ChecksumError
		code := int(rec.status.Load())
		switch {
		case errors.Is(fctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("not fetched within %s", timeout)
		case code >= 400:
			err = fmt.Errorf("the server answered %d %s", code, http.StatusText(code))
		case errors.As(err, &ce):
			err = fmt.Errorf("checksum mismatch: the options' checksum is %s, what was fetched has %s; if the file was meant to change, change the checksum",
				hex.EncodeToString(ce.Expected), hex.EncodeToString(ce.Actual))
		default:
			// go-getter's messages name its staging paths, which mean
			// nothing to the job's author.
			err = errors.New(strings.ReplaceAll(strings.ReplaceAll(err.Error(), out+"/", ""), stage+"/", ""))
		}
		shown, e := fail(err)
		e.(*artifactError).final = code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
		return shown, e
	}
	var owner *uidGid
	if _, uid, gid, ok := tr.taskOwner(); ok && a.Chown {
		owner = &uidGid{uid, gid}
	}
	if err := placeArtifact(out, rootDir, rel, mode == spec.ArtifactFile, owner); err != nil {
		return fail(err)
	}
	return shown, nil
}

type uidGid struct{ uid, gid int }

// placeArtifact copies what was fetched into out (a file, or a directory
// tree) to rel inside rootDir, through an os.Root: rel is the file itself
// when file is set, else the directory to copy into. owner, when set, is
// given every file and directory made.
func placeArtifact(out, rootDir, rel string, file bool, owner *uidGid) error {
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "" {
		rel = "."
	}
	chown := func(p string) error {
		if owner == nil {
			return nil
		}
		return root.Lchown(p, owner.uid, owner.gid)
	}
	info, err := os.Lstat(out)
	if err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		// go-getter links a directory on the node rather than copy it:
		// copy from the directory itself (the source the job names).
		if out, err = os.Readlink(out); err != nil {
			return err
		}
		if info, err = os.Stat(out); err != nil {
			return err
		}
	}
	if !file && !info.IsDir() {
		return fmt.Errorf("expected a directory, got a %s", info.Mode().Type())
	}
	if file {
		target := rel
		if d := filepath.Dir(target); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		return errors.Join(copyInto(root, target, out, info.Mode().Perm()), chown(target))
	}
	if err := root.MkdirAll(rel, 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, err := filepath.Rel(out, p)
		if err != nil {
			return err
		}
		target := filepath.Join(rel, r)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := root.MkdirAll(target, 0o755); err != nil {
				return err
			}
			if r == "." {
				return nil
			}
		case fi.Mode().IsRegular():
			if err := copyInto(root, target, p, fi.Mode().Perm()); err != nil {
				return err
			}
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link; an artifact holds only regular files and directories", r)
		default:
			return fmt.Errorf("%s is not a regular file or a directory (%s); artifacts hold only those", r, fi.Mode().Type())
		}
		return chown(target)
	})
}

// copyInto copies the file at src to name inside root, replacing what was
// there.
func copyInto(root *os.Root, name, src string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	err = errors.Join(err, out.Chmod(perm), out.Close())
	return err
}

// artifactTransport is the http.RoundTripper of an artifact's fetch: it
// keeps the status of the last response, and fails a body longer than
// max bytes. (go-getter's own MaxBytes cuts a body short without an
// error when the server sends no Content-Length: a truncated artifact.)
type artifactTransport struct {
	next   http.RoundTripper
	max    int64
	status atomic.Int32
}

func (s *artifactTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if resp == nil {
		return resp, err
	}
	s.status.Store(int32(resp.StatusCode))
	if resp.ContentLength > s.max {
		resp.Body.Close()
		return nil, s.tooLarge()
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: s.max, err: s.tooLarge()}
	return resp, err
}

func (s *artifactTransport) tooLarge() error {
	return fmt.Errorf("larger than the agent's limit of %d bytes (--artifact-max-mb)", s.max)
}

// limitedBody reads at most left bytes of a body, then fails with err.
type limitedBody struct {
	io.ReadCloser
	left int64
	err  error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, b.err
	}
	return n, err
}

// redactURL is src as an event may show it: a password in it and the
// values of its query (which carry signatures and tokens) replaced by
// "redacted"; and a replacer that takes those secrets out of an error's
// text.
func redactURL(src string) (string, *strings.Replacer) {
	u, err := url.Parse(src)
	if err != nil {
		return src, strings.NewReplacer()
	}
	var secrets []string
	if p, ok := u.User.Password(); ok && p != "" {
		secrets = append(secrets, p)
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	q := u.Query()
	for k, vs := range q {
		for i, v := range vs {
			if len(v) >= 4 {
				secrets = append(secrets, v, url.QueryEscape(v))
			}
			if v != "" {
				vs[i] = "redacted"
			}
		}
		q[k] = vs
	}
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	// Longest first, so that no part of a longer secret is left standing.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range slices.Compact(secrets) {
		pairs = append(pairs, s, "redacted")
	}
	return u.String(), strings.NewReplacer(pairs...)
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

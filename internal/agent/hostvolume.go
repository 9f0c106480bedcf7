package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// HostVolume is a directory of this machine that the agent offers jobs by
// name (`drover agent --host-volume NAME=PATH[:ro]`): its node publishes
// the name, and a group's volume block with that source mounts Path into
// its tasks, read-only when ReadOnly.
type HostVolume struct {
	Name     string
	Path     string
	ReadOnly bool
}

// ParseHostVolume reads NAME=PATH, NAME=PATH:ro or NAME=PATH:rw.
func ParseHostVolume(s string) (HostVolume, error) {
	name, path, ok := strings.Cut(s, "=")
	if !ok || name == "" || path == "" {
		return HostVolume{}, fmt.Errorf("host volume %q is not NAME=PATH[:ro]; write data=/srv/data, or data=/srv/data:ro for a read-only one", s)
	}
	v := HostVolume{Name: name, Path: path}
	if p, ok := strings.CutSuffix(path, ":ro"); ok {
		v.Path, v.ReadOnly = p, true
	} else if p, ok := strings.CutSuffix(path, ":rw"); ok {
		v.Path = p
	}
	return v, nil
}

// String is the volume as --host-volume takes it.
func (v HostVolume) String() string {
	if v.ReadOnly {
		return v.Name + "=" + v.Path + ":ro"
	}
	return v.Name + "=" + v.Path
}

// checkHostVolumes refuses, before the agent starts, host volumes that
// could not be mounted: a bad name, a name given twice, a path that is
// not absolute, does not exist or is not a directory.
func checkHostVolumes(vs []HostVolume) error {
	var errs []error
	seen := map[string]bool{}
	for _, v := range vs {
		what := fmt.Sprintf("host volume %q (%s)", v.Name, v.String())
		if msg := spec.CheckHostVolumeName(v.Name); msg != "" {
			errs = append(errs, fmt.Errorf("%s: name %s", what, msg))
		}
		if seen[v.Name] {
			errs = append(errs, fmt.Errorf("%s: the name is declared twice; give each --host-volume its own name", what))
		}
		seen[v.Name] = true
		if !filepath.IsAbs(v.Path) {
			errs = append(errs, fmt.Errorf("%s: path %q is not absolute; give the directory's full path, such as /srv/%s", what, v.Path, v.Name))
			continue
		}
		st, err := os.Stat(v.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s: %s does not exist; create the directory (mkdir -p %s) or fix the path", what, v.Path, v.Path))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		case !st.IsDir():
			errs = append(errs, fmt.Errorf("%s: %s is not a directory; a host volume is a directory the tasks mount", what, v.Path))
		}
	}
	return errors.Join(errs...)
}

// nodeHostVolumes are the host volumes as the node record publishes them:
// names and read-only, sorted by name; the paths stay here.
func nodeHostVolumes(vs []HostVolume) []spec.HostVolume {
	var out []spec.HostVolume
	for _, v := range vs {
		out = append(out, spec.HostVolume{Name: v.Name, ReadOnly: v.ReadOnly})
	}
	slices.SortFunc(out, func(a, b spec.HostVolume) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// hostVolume returns the agent's host volume called name.
func (a *Agent) hostVolume(name string) (HostVolume, bool) {
	for _, v := range a.cfg.HostVolumes {
		if v.Name == name {
			return v, true
		}
	}
	return HostVolume{}, false
}

// volumeMounts resolves the task's volume_mount blocks into the host
// paths they mount (a per_alloc volume's is the host volume named for the
// instance's index, data[N]), each read-only when the mount, the group's volume or
// the agent's host volume says so. A CSI volume mounts nothing (drover
// has no CSI). An error says which mount cannot be made; starting again
// would not make it (driver.ErrNoRetry).
func (tr *taskRunner) volumeMounts(env map[string]string, rt spec.TaskRuntime) ([]driver.Mount, error) {
	g := &spec.Group{Volumes: tr.ar.alloc.Volumes}
	var out []driver.Mount
	for _, m := range tr.task.VolumeMounts {
		if m == nil {
			continue
		}
		req := g.Volume(m.Volume)
		if req == nil {
			return nil, fmt.Errorf("volume_mount of %q: the group declares no such volume: %w", m.Volume, driver.ErrNoRetry)
		}
		if req.TypeOf() != spec.VolumeHost {
			continue
		}
		source := req.SourceFor(tr.ar.alloc.Index)
		hv, ok := tr.ar.agent.hostVolume(source)
		if !ok {
			return nil, fmt.Errorf("volume %q: node %s has no host volume %q (its agent's --host-volume flags changed since the instance was placed): %w",
				m.Volume, tr.ar.agent.nodeName, source, driver.ErrNoRetry)
		}
		dest := rt.Interpolate(m.Destination, env)
		ro := g.VolumeMountReadOnly(m) || hv.ReadOnly
		if tr.drv.Info().OwnFilesystem {
			if !filepath.IsAbs(dest) {
				return nil, fmt.Errorf("volume_mount of %q: destination %q is not absolute; a container mounts a volume at an absolute path, such as \"/data\": %w", m.Volume, dest, driver.ErrNoRetry)
			}
			out = append(out, driver.Mount{Host: hv.Path, Task: dest, ReadOnly: ro})
			continue
		}
		link, err := tr.volumeLink(m, dest)
		if err != nil {
			return nil, err
		}
		out = append(out, driver.Mount{Host: hv.Path, Task: link, ReadOnly: ro})
	}
	return out, nil
}

// volumeLink is where a task that runs on the host's file system (exec,
// raw_exec) finds a volume: dest, relative to the task's directory or
// absolute inside it or inside the alloc's shared directory (as a
// template's destination), symbolic links followed only within that
// directory. An absolute destination elsewhere cannot be made without a
// mount namespace, which these tasks do not have.
func (tr *taskRunner) volumeLink(m *spec.VolumeMount, dest string) (string, error) {
	if !filepath.IsAbs(dest) {
		dest = filepath.Join(tr.dir, dest)
	}
	dest = filepath.Clean(dest)
	root := tr.dir
	if shared := tr.ar.sharedDir(); inside(shared, dest) {
		root = shared
	}
	if !inside(root, dest) || dest == root {
		return "", fmt.Errorf("volume_mount of %q: destination %q is outside the task's directory, and a %s task runs on the host's file system, where drover does not mount; "+
			"write a destination inside it, such as \"local/%s\" or \"${NOMAD_TASK_DIR}/%s\", and read the volume there (or run the task with the docker driver): %w",
			m.Volume, m.Destination, tr.task.Driver, m.Volume, m.Volume, driver.ErrNoRetry)
	}
	rel, err := filepath.Rel(root, dest)
	if err != nil {
		return "", fmt.Errorf("volume_mount of %q: %w", m.Volume, err)
	}
	parent, err := securejoin.SecureJoin(root, filepath.Dir(rel))
	if err != nil {
		return "", fmt.Errorf("volume_mount of %q: %w", m.Volume, err)
	}
	return filepath.Join(parent, filepath.Base(rel)), nil
}

// inside reports whether p is dir or under it.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// linkVolumes makes each mount a symbolic link at its Task path to its
// Host path, replacing a link that is there; anything else there is an
// error.
func linkVolumes(ms []driver.Mount) error {
	for _, m := range ms {
		if fi, err := os.Lstat(m.Task); err == nil {
			if fi.Mode()&fs.ModeSymlink == 0 {
				return fmt.Errorf("volume at %s: the task's directory already has a %s there; pick another destination: %w", m.Task, kindOf(fi), driver.ErrNoRetry)
			}
			if target, err := os.Readlink(m.Task); err == nil && target == m.Host {
				continue
			}
			if err := os.Remove(m.Task); err != nil {
				return fmt.Errorf("volume at %s: %w", m.Task, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(m.Task), 0o755); err != nil {
			return fmt.Errorf("volume at %s: %w", m.Task, err)
		}
		if err := os.Symlink(m.Host, m.Task); err != nil {
			return fmt.Errorf("volume at %s: %w", m.Task, err)
		}
	}
	return nil
}

func kindOf(fi fs.FileInfo) string {
	if fi.IsDir() {
		return "directory"
	}
	return "file"
}

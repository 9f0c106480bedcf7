package spec

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Artifact is a task's artifact block, as Nomad's: a file, a directory or
// an archive fetched into the task's directory before the task starts
// (and before its templates render). Archives are unpacked unless
// options' archive is false or the mode is file; options' checksum is
// verified.
type Artifact struct {
	// Source is an http(s) URL, or a file or directory on the node
	// (file:///path or /path). ${...} is interpolated as in config.
	Source string `json:"source"`
	// Destination is a directory relative to the task's directory
	// ("local/" when unset), or under ${NOMAD_TASK_DIR},
	// ${NOMAD_SECRETS_DIR} or ${NOMAD_ALLOC_DIR}; with mode file, the
	// file itself. Never outside the alloc's directory.
	Destination string `json:"destination,omitempty"`
	// Mode is "any" (the default: a directory for an archive or a
	// directory source, else a file inside the destination), "file" or
	// "dir".
	Mode string `json:"mode,omitempty"`
	// Options are checksum ("sha256:<hex>", md5, sha1, sha512, or
	// "file:<URL>" of a checksum file), archive ("false": do not unpack)
	// and filename (the name of a file fetched in mode any).
	Options map[string]string `json:"options,omitempty"`
	// Headers are sent with an http(s) request.
	Headers map[string]string `json:"headers,omitempty"`
	// Chown gives what is fetched to the task's user.
	Chown bool `json:"chown,omitempty"`
}

// Artifact modes.
const (
	ArtifactAny  = "any"
	ArtifactFile = "file"
	ArtifactDir  = "dir"
)

// DefaultArtifactDestination is where an artifact without a destination
// goes, as in Nomad.
const DefaultArtifactDestination = "local/"

// DestinationOf is the artifact's destination, local/ when unset.
func (a *Artifact) DestinationOf() string {
	if a.Destination == "" {
		return DefaultArtifactDestination
	}
	return a.Destination
}

// ModeOf is the artifact's mode, ArtifactAny when unset.
func (a *Artifact) ModeOf() string {
	if a.Mode == "" {
		return ArtifactAny
	}
	return a.Mode
}

// ArtifactOptions are the option keys an artifact takes.
var ArtifactOptions = []string{"archive", "checksum", "filename"}

// checksumLen is the length in hex digits of each checksum type's value.
var checksumLen = map[string]int{"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}

// artifactSchemes are the URL schemes a source may have.
var artifactSchemes = []string{"http", "https", "file"}

func validateArtifacts(ps *Problems, path string, t *Task) {
	for i, a := range t.Artifacts {
		p := fmt.Sprintf("%s.artifacts[%d]", path, i)
		what := fmt.Sprintf("task %q: artifact %d", t.Name, i+1)
		if a == nil {
			ps.Add(p, "artifact is null")
			continue
		}
		if msg := ArtifactSourceProblem(a.Source); msg != "" {
			ps.Add(p+".source", "%s: %s", what, msg)
		}
		switch a.Mode {
		case "", ArtifactAny, ArtifactFile, ArtifactDir:
		default:
			ps.Add(p+".mode", "%s: unknown mode %q; use \"any\", \"file\" or \"dir\"", what, a.Mode)
		}
		if msg := checkArtifactDestination(a.DestinationOf(), a.ModeOf() == ArtifactFile); msg != "" {
			ps.Add(p+".destination", "%s: %s", what, msg)
		}
		keys := make([]string, 0, len(a.Options))
		for k := range a.Options {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := a.Options[k]
			switch k {
			case "checksum":
				if msg := checkChecksum(v); msg != "" {
					ps.Add(p+".options.checksum", "%s: %s", what, msg)
				}
			case "archive":
				if _, err := strconv.ParseBool(v); err != nil && !strings.Contains(v, "${") {
					ps.Add(p+".options.archive", "%s: archive %q is not true or false", what, v)
				}
			case "filename":
				if v == "" || strings.Contains(v, "/") || v == "." || v == ".." {
					ps.Add(p+".options.filename", "%s: filename %q must be a plain file name, without /", what, v)
				}
			default:
				ps.Add(p+".options."+k, "%s: unknown option %q; drover's http(s) and file sources take %s", what, k, strings.Join(ArtifactOptions, ", "))
			}
		}
		for k := range a.Headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				ps.Add(p+".headers", "%s: header name %q is not a valid HTTP header name", what, k)
			}
		}
	}
}

// ArtifactSourceProblem reports what is wrong with an artifact's source, or "".
func ArtifactSourceProblem(src string) string {
	if src == "" {
		return "needs a source: an http(s) URL, or a file or directory on the node (file:///path or /path)"
	}
	if strings.HasPrefix(src, "${") || strings.HasPrefix(src, "/") {
		return "" // interpolated (checked when fetched), or a path on the node
	}
	// The scheme and host only: the agent parses the whole URL when it
	// fetches (spec imports only archtest's pure allow-list).
	scheme, rest, ok := strings.Cut(src, "://")
	if ok && slices.Contains(artifactSchemes, strings.ToLower(scheme)) && !strings.Contains(src, "::") {
		host, _, _ := strings.Cut(rest, "/")
		host, _, _ = strings.Cut(host, "?")
		if !strings.EqualFold(scheme, "file") && host == "" {
			return fmt.Sprintf("source %q has no host", src)
		}
		return ""
	}
	return fmt.Sprintf("source %q: drover fetches http:// and https:// URLs and files on the node (file:///path or an absolute path); git, hg, s3, gcs and other go-getter sources are not supported: publish it over http, or fetch it in a prestart task", src)
}

// checkArtifactDestination reports what is wrong with an artifact's
// destination, or "". file: the destination is the file itself.
func checkArtifactDestination(dest string, file bool) string {
	rest := dest
	for _, v := range TemplateDirVars {
		if r, ok := strings.CutPrefix(dest, v); ok {
			rest = strings.TrimPrefix(r, "/")
			break
		}
	}
	switch clean := path.Clean(rest); {
	case strings.Contains(rest, interpolationStart):
		return "" // another runtime variable: the agent resolves it and keeps the artifact inside the task's or the alloc's directory
	case path.IsAbs(rest):
		return fmt.Sprintf("destination %q is absolute; write it relative to the task's directory (\"local/\") or under ${NOMAD_TASK_DIR}", dest)
	case clean == sharedFromTask || strings.HasPrefix(clean, sharedFromTask+"/"):
		// Nomad's "../alloc/": the alloc's shared directory, beside
		// the task's, as ${NOMAD_ALLOC_DIR} is.
	case clean == ".." || strings.HasPrefix(clean, "../"):
		return fmt.Sprintf("destination %q leaves the task's directory; write it inside (\"local/\")", dest)
	case file && (rest == "" || clean == "." || strings.HasSuffix(rest, "/")):
		return fmt.Sprintf("destination %q names a directory, but mode \"file\" writes a file there: name the file (\"local/app.bin\")", dest)
	}
	return ""
}

// checkChecksum reports what is wrong with an artifact's checksum option,
// or "".
func checkChecksum(v string) string {
	if strings.Contains(v, "${") {
		return ""
	}
	typ, val, ok := strings.Cut(v, ":")
	if typ == "file" && ok {
		if msg := ArtifactSourceProblem(val); msg != "" {
			return "checksum file " + msg
		}
		return ""
	}
	n, known := checksumLen[typ]
	switch {
	case !ok || !known:
		return fmt.Sprintf("checksum %q must be TYPE:VALUE, TYPE one of md5, sha1, sha256, sha512 (\"sha256:9f86d0...\"), or file:URL of a checksum file", v)
	case len(val) != n || strings.Trim(strings.ToLower(val), "0123456789abcdef") != "":
		return fmt.Sprintf("checksum %q: a %s checksum is %d hex digits", v, typ, n)
	}
	return ""
}

package spec

import (
	"strings"
	"testing"
)

// TestArtifactValidation: each mistake in an artifact block is refused at
// its field with what to write; what Nomad's files write is taken.
func TestArtifactValidation(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		name string
		a    Artifact
		want string // "" for valid
	}{
		{"https", Artifact{Source: "https://example.com/a.tar.gz", Options: map[string]string{"checksum": sum}}, ""},
		{"file URL, mode file", Artifact{Source: "file:///srv/a", Mode: "file", Destination: "local/a"}, ""},
		{"path on the node", Artifact{Source: "/srv/a", Destination: "${NOMAD_ALLOC_DIR}/data"}, ""},
		{"interpolated source", Artifact{Source: "${NOMAD_META_url}"}, ""},
		{"md5, archive false", Artifact{Source: "http://h/a", Options: map[string]string{"checksum": "md5:" + strings.Repeat("0", 32), "archive": "false"}}, ""},
		{"checksum file", Artifact{Source: "http://h/a", Options: map[string]string{"checksum": "file:https://h/a.sha256"}}, ""},
		{"no source", Artifact{}, "artifacts[0].source: task \"t\": artifact 1: needs a source"},
		{"git", Artifact{Source: "git::https://h/r.git"}, `git, hg, s3, gcs and other go-getter sources are not supported`},
		{"s3 scheme", Artifact{Source: "s3://bucket/key"}, `publish it over http`},
		{"shorthand", Artifact{Source: "github.com/a/b"}, `drover fetches http:// and https:// URLs`},
		{"relative path", Artifact{Source: "local/x"}, `drover fetches http:// and https:// URLs`},
		{"no host", Artifact{Source: "https:///a"}, `has no host`},
		{"bad mode", Artifact{Source: "http://h/a", Mode: "folder"}, `artifacts[0].mode: task "t": artifact 1: unknown mode "folder"`},
		{"absolute destination", Artifact{Source: "http://h/a", Destination: "/etc"}, `destination "/etc" is absolute`},
		{"alloc dir from the task's", Artifact{Source: "http://h/a", Destination: "../alloc/go.mod", Mode: "file"}, ""},
		{"beside the alloc dir", Artifact{Source: "http://h/a", Destination: "../allocx"}, `leaves the task's directory`},
		{"escaping destination", Artifact{Source: "http://h/a", Destination: "${NOMAD_TASK_DIR}/../../x"}, `leaves the task's directory`},
		{"other variable", Artifact{Source: "http://h/a", Destination: "${NOMAD_META_dir}/${NOMAD_TASK_NAME}.env"}, ""},
		{"file mode to a directory", Artifact{Source: "http://h/a", Mode: "file"}, `destination "local/" names a directory, but mode "file" writes a file there`},
		{"checksum type", Artifact{Source: "http://h/a", Options: map[string]string{"checksum": "crc32:abcd"}}, `must be TYPE:VALUE`},
		{"checksum length", Artifact{Source: "http://h/a", Options: map[string]string{"checksum": "sha1:abcd"}}, `a sha1 checksum is 40 hex digits`},
		{"checksum not hex", Artifact{Source: "http://h/a", Options: map[string]string{"checksum": "md5:" + strings.Repeat("z", 32)}}, `a md5 checksum is 32 hex digits`},
		{"archive", Artifact{Source: "http://h/a", Options: map[string]string{"archive": "maybe"}}, `archive "maybe" is not true or false`},
		{"filename", Artifact{Source: "http://h/a", Options: map[string]string{"filename": "../x"}}, `must be a plain file name`},
		{"git option", Artifact{Source: "http://h/a", Options: map[string]string{"ref": "main"}}, `unknown option "ref"`},
		{"header", Artifact{Source: "http://h/a", Headers: map[string]string{"Bad Name": "x"}}, `is not a valid HTTP header name`},
	} {
		a := c.a
		err := optionsJob(func(_ *Group, t *Task) { t.Artifacts = []*Artifact{&a} }).Validate().Err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

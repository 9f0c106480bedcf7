package spec

import (
	"strings"
	"testing"
	"time"
)

// TestDisconnectNamesCanonicalize: Nomad's stop_on_client_after, its
// older stop_after_client_disconnect and drover's stop_after are one
// setting after Canonicalize; two of them written differently are
// refused; a disconnect block that sets none of them is no policy.
func TestDisconnectNamesCanonicalize(t *testing.T) {
	s30 := Duration(30 * time.Second)
	for _, c := range []struct {
		name string
		edit func(g *Group)
		want Duration // the StopAfter after Canonicalize, 0: no policy
		err  string
	}{
		{"stop_after", func(g *Group) { g.Disconnect = &DisconnectPolicy{StopAfter: s30} }, s30, ""},
		{"stop_on_client_after", func(g *Group) { g.Disconnect = &DisconnectPolicy{StopOnClientAfter: s30} }, s30, ""},
		{"stop_after_client_disconnect", func(g *Group) { g.StopAfterClientDisconnect = s30 }, s30, ""},
		{"both, the same", func(g *Group) { g.Disconnect = &DisconnectPolicy{StopAfter: s30, StopOnClientAfter: s30} }, s30, ""},
		{"empty block", func(g *Group) { g.Disconnect = &DisconnectPolicy{} }, 0, ""},
		{"both, differently", func(g *Group) {
			g.Disconnect = &DisconnectPolicy{StopAfter: s30, StopOnClientAfter: Duration(time.Minute)}
		}, s30,
			"groups[0].disconnect.stop_on_client_after: stop_on_client_after 1m and stop_after 30s are the same setting, written twice differently"},
		{"group and block, differently", func(g *Group) {
			g.StopAfterClientDisconnect = Duration(time.Minute)
			g.Disconnect = &DisconnectPolicy{StopOnClientAfter: s30}
		}, s30, "groups[0].stop_after_client_disconnect: stop_after_client_disconnect 1m differs from disconnect's stop_after 30s"},
		{"too long", func(g *Group) { g.Disconnect = &DisconnectPolicy{StopOnClientAfter: Duration(2 * time.Hour)} }, Duration(2 * time.Hour),
			"stop_after (Nomad: stop_on_client_after) must be between 1s and 1h0m0s, got 2h0m0s"},
	} {
		j := optionsJob(func(g *Group, _ *Task) { c.edit(g) })
		err := j.Validate().Err()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.err)
		}
		got := Duration(0)
		if d := j.Groups[0].Disconnect; d != nil {
			got = d.StopAfter
		}
		if got != c.want {
			t.Errorf("%s: stop_after %s after Canonicalize, want %s", c.name, got, c.want)
		}
	}
}

// TestLogLimits: a task's logs block sets how many files of each stream
// are kept and their size; without it, 4 of 10 MB.
func TestLogLimits(t *testing.T) {
	for _, c := range []struct {
		logs  *LogConfig
		files int
		bytes int64
		err   string
	}{
		{nil, 4, 10 << 20, ""},
		{&LogConfig{MaxFiles: 2}, 2, 10 << 20, ""},
		{&LogConfig{MaxFiles: 5, MaxFileSizeMB: 1}, 5, 1 << 20, ""},
		{&LogConfig{MaxFiles: -1}, 4, 10 << 20, "groups[0].tasks[0].logs.max_files: max_files -1 is out of range; use 1 to 1000"},
		{&LogConfig{MaxFileSizeMB: -3}, 4, 10 << 20, "groups[0].tasks[0].logs.max_file_size: max_file_size -3 MB is out of range"},
	} {
		j := optionsJob(func(_ *Group, t *Task) { t.Logs = c.logs })
		err := j.Validate().Err()
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("logs %+v: %v, want %q", c.logs, err, c.err)
		}
		if c.err != "" {
			continue
		}
		if files, bytes := j.Groups[0].Tasks[0].LogLimits(); files != c.files || bytes != c.bytes {
			t.Errorf("logs %+v: %d files of %d bytes, want %d of %d", c.logs, files, bytes, c.files, c.bytes)
		}
	}
}

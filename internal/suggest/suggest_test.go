package suggest

import "testing"

func TestClosestAndHint(t *testing.T) {
	names := []string{"data_dir", "http_addr", "servers", "log_level"}
	for _, c := range []struct{ name, want string }{
		{"data_dri", "data_dir"},
		{"server", "servers"},
		{"LOG_LEVEL", "log_level"},
		{"xy", ""},     // too short to be a typo of anything
		{"memory", ""}, // nothing near
	} {
		if got := Closest(c.name, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got, want := Hint("data_dri", names), `did you mean "data_dir"?`; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got, want := Hint("memory", names), "expected one of: data_dir, http_addr, log_level, servers"; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got, want := Hint("x", nil), "nothing is allowed here"; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
}

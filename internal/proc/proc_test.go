package proc

import (
	"os"
	"testing"
)

func TestParseStatOddCommandName(t *testing.T) {
	// A command name may hold spaces and parentheses.
	line := "42 (a) (b c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768\n"
	s, err := parseStat(42, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if s.State != 'S' || s.PGID != 42 || s.StartTicks != 123456 || !s.HasExitCode || s.ExitCode != 768 ||
		s.CPUTicks != 3 || s.RSSPages != 10 {
		t.Errorf("got %+v", s)
	}
}

func TestReadStatSelf(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.Dead() || s.StartTicks == 0 {
		t.Errorf("self: %+v", s)
	}
	if st := StartTime(s.StartTicks); st.IsZero() {
		t.Error("no start time")
	}
	env, _ := Environ(os.Getpid())
	if _, ok := Getenv(env, "PATH"); !ok {
		t.Error("PATH not found in environ")
	}
	if _, ok := Getenv([]byte("PATHX=1\x00"), "PATH"); ok {
		t.Error("PATHX taken for PATH")
	}
}

package jobfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// TestUnitFleetRules holds every pair of [X-Fleet] options fleet's unit
// validation refuses, and the combinations it accepts, in one unit each.
// A refusal must name both options, be reported at the line of the later
// one, and name the line of the other.
func TestUnitFleetRules(t *testing.T) {
	const first = 4 // the line of the first [X-Fleet] option below
	type refusal struct {
		line int      // where it is reported
		says []string // what the message must hold
	}
	tests := []struct {
		name   string
		fleet  []string
		typ    spec.JobType // when accepted
		refuse []refusal
	}{
		{"Global with Conflicts", []string{"Global=true", "Conflicts=agent-old*.service"}, spec.JobSystem, nil},
		{"Global with MachineMetadata and Conflicts", []string{"MachineMetadata=role=edge", "Global=true", "Conflicts=agent*"}, spec.JobSystem, nil},
		{"Global=false with MachineID", []string{"Global=false", "MachineID=abc"}, spec.JobService, nil},
		{"Global=false with MachineOf and Replaces", []string{"Global=false", "MachineOf=db.service", "Global=no"}, spec.JobService, nil},
		{"MachineID alone", []string{"MachineID=abc"}, spec.JobService, nil},
		{"MachineID with MachineMetadata", []string{"MachineID=abc", "MachineMetadata=disk=ssd"}, spec.JobService, nil},
		{"MachineOf with Conflicts on other units", []string{"MachineOf=db.service", "Conflicts=web*.service"}, spec.JobService, nil},
		{"MachineOf with Replaces of other units", []string{"MachineOf=db@1.service", "Replaces=db@2.service"}, spec.JobService, nil},
		{"Replaces alone", []string{"Replaces=old-*.service"}, spec.JobService, nil},

		{"MachineID with MachineOf", []string{"MachineID=abc", "MachineOf=db.service"}, "",
			[]refusal{{first + 1, []string{"MachineOf= cannot be used with MachineID= (line 4)"}}}},
		{"MachineID with Conflicts", []string{"Conflicts=web*", "MachineID=abc"}, "",
			[]refusal{{first + 1, []string{"MachineID= cannot be used with Conflicts= (line 4)"}}}},
		{"MachineID with Global", []string{"Global=true", "MachineID=abc"}, "",
			[]refusal{{first + 1, []string{"MachineID= cannot be used with Global=true (line 4)"}}}},
		{"MachineID with Replaces", []string{"MachineID=abc", "Replaces=old*"}, "",
			[]refusal{{first + 1, []string{"Replaces= cannot be used with MachineID= (line 4)"}}}},
		{"Global with MachineOf", []string{"MachineOf=db.service", "Global=yes"}, "",
			[]refusal{{first + 1, []string{"Global=yes cannot be used with MachineOf= (line 4)"}}}},
		{"Global with Replaces", []string{"Global=true", "Replaces=old*"}, "",
			[]refusal{{first + 1, []string{"Replaces= cannot be used with Global=true (line 4)"}}}},
		{"Conflicts with Replaces", []string{"Conflicts=a*", "Replaces=b*"}, "",
			[]refusal{{first + 1, []string{"Replaces= cannot be used with Conflicts= (line 4)"}}}},
		{"older names", []string{"X-Conflicts=a*", "X-ConditionMachineID=abc"}, "",
			[]refusal{{first + 1, []string{"X-ConditionMachineID= cannot be used with X-Conflicts= (line 4)"}}}},
		{"MachineOf matched by its own Conflicts", []string{"Conflicts=db*.service", "MachineOf=db.service"}, "",
			[]refusal{{first + 1, []string{"unresolvable requirements", "MachineOf=db.service", "Conflicts=db*.service (line 4)"}}}},
		{"MachineOf matched by its own Replaces", []string{"MachineOf=db@%i.service", "Replaces=db@*"}, "",
			[]refusal{{first, []string{"unresolvable requirements", "MachineOf=db@7.service", "Replaces=db@* (line 5)"}}}},
		{"every refusal at once", []string{"Global=true", "MachineID=abc", "MachineOf=x.service", "Conflicts=x*", "Replaces=y*"}, "",
			[]refusal{
				{first + 1, []string{"MachineID= cannot be used with Global=true (line 4)"}},
				{first + 2, []string{"MachineOf= cannot be used with Global=true (line 4)"}},
				{first + 2, []string{"MachineOf= cannot be used with MachineID= (line 5)"}},
				{first + 2, []string{"unresolvable requirements", "Conflicts=x* (line 7)"}},
				{first + 3, []string{"Conflicts= cannot be used with MachineID= (line 5)"}},
				{first + 4, []string{"Replaces= cannot be used with Conflicts= (line 7)"}},
				{first + 4, []string{"Replaces= cannot be used with Global=true (line 4)"}},
				{first + 4, []string{"Replaces= cannot be used with MachineID= (line 5)"}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "[Service]\nExecStart=/bin/true\n[X-Fleet]\n" + strings.Join(tt.fleet, "\n") + "\n"
			job, err := Decode("u@7.service", []byte(src))
			if tt.refuse == nil {
				if err != nil {
					t.Fatalf("refused:\n%v", err)
				}
				if job.Type != tt.typ {
					t.Errorf("job type %q, want %q", job.Type, tt.typ)
				}
				return
			}
			var ps spec.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("accepted (err %v), want a refusal", err)
			}
			if len(ps) != len(tt.refuse) {
				t.Errorf("%d problems, want %d:\n%v", len(ps), len(tt.refuse), ps)
			}
			for i, want := range tt.refuse {
				if i >= len(ps) {
					break
				}
				if at := fmt.Sprintf("u@7.service:%d", want.line); ps[i].Pos != at {
					t.Errorf("problem %d at %q, want %q: %s", i, ps[i].Pos, at, ps[i].Message)
				}
				for _, s := range want.says {
					if !strings.Contains(ps[i].Message, s) {
						t.Errorf("problem %d %q does not say %q", i, ps[i].Message, s)
					}
				}
				if !strings.Contains(ps[i].Message, "; keep one of them") && !strings.Contains(ps[i].Message, "; remove one of them") {
					t.Errorf("problem %d %q does not say what to do", i, ps[i].Message)
				}
			}
		})
	}
}

// TestUnitOrdinaryKeys: the keys fleet's units commonly use are never a
// parse error. Each is either done (the job shows it) or accepted with a
// warning at its line that says what drover does instead.
func TestUnitOrdinaryKeys(t *testing.T) {
	src := `[Unit]
Description=web %i
Documentation=https://example.com/a%20b
After=docker.service
Requires=docker.service
Wants=etcd.service
BindsTo=docker.service
Before=web-discovery@%i.service
ConditionPathExists=/etc/web
StartLimitBurst=2

[Service]
Type=simple
User=nobody
WorkingDirectory=/tmp
Environment=A=1
EnvironmentFile=-/etc/environment
ExecStartPre=/bin/true
ExecStart=/bin/sleep 1000
ExecStartPost=/usr/bin/etcdctl set /web/%i up
ExecReload=/bin/kill -HUP $MAINPID
ExecStop=/bin/true
ExecStopPost=/bin/rm -f /tmp/web-%i
Restart=always
RestartSec=2
TimeoutStartSec=0
TimeoutStopSec=15
KillMode=process
KillSignal=SIGINT
LimitNOFILE=65536
MemoryLimit=512M
StandardOutput=journal
SyslogIdentifier=web
PrivateTmp=true
NotAKeyAtAll=1

[Install]
WantedBy=multi-user.target
`
	job, warns, err := DecodeWarn("web@3.service", []byte(src))
	if err != nil {
		t.Fatalf("refused:\n%v", err)
	}
	task := job.Groups[0].Tasks[0]
	want := spec.TaskConfig{
		Command: "/bin/sleep", Args: []string{"1000"}, User: "nobody", WorkDir: "/tmp",
		Prestart: []spec.Command{{Command: "/bin/true"}},
		Stop:     &spec.Command{Command: "/bin/true"},
		Poststop: []spec.Command{{Command: "/bin/rm", Args: []string{"-f", "/tmp/web-3"}}},
	}
	if diff := cmp.Diff(want, task.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if task.Restart.Allowed() != 2 || task.KillTimeout.Std().Seconds() != 15 {
		t.Errorf("restart %+v, kill timeout %s: want 2 attempts (StartLimitBurst=2), 15s", task.Restart, task.KillTimeout)
	}
	if got := job.Meta["documentation"]; got != "https://example.com/a%20b" {
		t.Errorf("documentation %q: want the URL as written", got)
	}
	wantWarn := map[int]string{
		4:  "After= in [Unit]: drover ignores it: it orders or binds the unit",
		5:  "Requires= in [Unit]: drover ignores it",
		6:  "Wants= in [Unit]",
		7:  "BindsTo= in [Unit]",
		8:  "Before= in [Unit]",
		9:  "ConditionPathExists= in [Unit]: drover ignores it: systemd would check it on the host",
		17: "EnvironmentFile= in [Service]: drover does not read it",
		20: "ExecStartPost= in [Service]: drover does not run it",
		21: "ExecReload= in [Service]: drover ignores it: drover has no reload",
		28: "KillMode=process: drover stops every process of the task",
		29: "KillSignal=SIGINT: drover stops a task with SIGTERM",
		30: "LimitNOFILE= in [Service]: drover ignores it: it does not set rlimits",
		31: "MemoryLimit= in [Service]: drover ignores it: a unit's task reserves drover's default resources",
		32: "StandardOutput= in [Service]: drover ignores it: the task's stdout and stderr go to its logs",
		33: "SyslogIdentifier= in [Service]",
		34: "PrivateTmp= in [Service]: drover ignores it: it does not apply this setting",
		35: "NotAKeyAtAll= in [Service] is not a key drover knows; ignored",
		38: "[Install] is ignored, as fleet ignored it",
	}
	got := map[int]string{}
	for _, w := range warns {
		var line int
		if _, err := fmt.Sscanf(strings.TrimPrefix(w.Pos, "web@3.service:"), "%d", &line); err != nil {
			t.Errorf("warning without a line: %s", w)
			continue
		}
		got[line] = w.Message
	}
	for line, w := range wantWarn {
		if !strings.HasPrefix(got[line], w) {
			t.Errorf("line %d: warning %q, want one starting %q", line, got[line], w)
		}
	}
	for line, w := range got {
		if _, ok := wantWarn[line]; !ok {
			t.Errorf("line %d: unexpected warning %q", line, w)
		}
	}
}

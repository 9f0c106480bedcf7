package jobfile

import "strings"

// The ordinary systemd keys of [Unit] and [Service] that drover accepts
// without doing what they ask, each with what drover does instead: a unit
// written for fleet runs, and says where it runs differently. Keys drover
// implements are in unitDecoder.unit and unitDecoder.service.

const (
	ignoredOrdering = "drover ignores it: it orders or binds the unit against other units on the same host, and a drover task is not a systemd unit; [X-Fleet] MachineOf= places a job beside another job"
	ignoredHost     = "drover ignores it: it tells systemd how to manage the unit on the host, and drover does not hand the task to systemd"
	ignoredCheck    = "drover ignores it: systemd would check it on the host before starting; check in an ExecStartPre= command instead (its failure fails the start), or choose nodes with [X-Fleet] MachineMetadata="
	ignoredMain     = "drover ignores it: the command is the task's process, kept in the foreground, and drover follows it directly"
	ignoredKill     = "drover ignores it: it stops a task with ExecStop=, then SIGTERM to all of the task's processes, then SIGKILL after TimeoutStopSec="
	ignoredExit     = "drover ignores it: exit code 0 is success and any other exit is a failure; Restart= applies to every exit"
	ignoredResource = "drover ignores it: a unit's task reserves drover's default resources (100 MHz, 300 MB), and the exec driver limits it to them; write an HCL or YAML job file to choose resources"
	ignoredLimit    = "drover ignores it: it does not set rlimits; the task's process has the agent's"
	ignoredOutput   = "drover ignores it: the task's stdout and stderr go to its logs (drover logs)"
	ignoredExec     = "drover ignores it: it does not apply this setting to the task's process"
	ignoredEnv      = "drover ignores it: a task's environment is drover's DROVER_* variables and Environment=, never the agent's"
)

// unitIgnoredKeys are the [Unit] keys drover accepts and ignores.
var unitIgnoredKeys = map[string]string{
	"After": ignoredOrdering, "Before": ignoredOrdering, "Wants": ignoredOrdering, "Requires": ignoredOrdering,
	"Requisite": ignoredOrdering, "BindsTo": ignoredOrdering, "PartOf": ignoredOrdering, "Upholds": ignoredOrdering,
	"OnFailure": ignoredOrdering, "OnSuccess": ignoredOrdering, "PropagatesReloadTo": ignoredOrdering,
	"ReloadPropagatedFrom": ignoredOrdering, "PropagatesStopTo": ignoredOrdering, "StopPropagatedFrom": ignoredOrdering,
	"JoinsNamespaceOf": ignoredOrdering, "RequiresMountsFor": ignoredOrdering, "StopWhenUnneeded": ignoredOrdering,
	"DefaultDependencies": ignoredOrdering, "OnFailureJobMode": ignoredOrdering,
	"Conflicts":         ignoredOrdering + " (fleet's Conflicts= belongs in [X-Fleet])",
	"RefuseManualStart": ignoredHost, "RefuseManualStop": ignoredHost, "AllowIsolate": ignoredHost,
	"IgnoreOnIsolate": ignoredHost, "CollectMode": ignoredHost, "FailureAction": ignoredHost, "SuccessAction": ignoredHost,
	"FailureActionExitStatus": ignoredHost, "SuccessActionExitStatus": ignoredHost, "JobTimeoutSec": ignoredHost,
	"JobRunningTimeoutSec": ignoredHost, "JobTimeoutAction": ignoredHost, "JobTimeoutRebootArgument": ignoredHost,
	"StartLimitAction": ignoredHost, "RebootArgument": ignoredHost, "SourcePath": ignoredHost,
}

// serviceIgnoredKeys are the [Service] keys drover accepts and ignores
// whatever their value. Others depend on the value (KillMode=,
// KillSignal=, TimeoutStartSec=, ...): see unitDecoder.service.
var serviceIgnoredKeys = map[string]string{
	"ExecStartPost": "drover does not run it: it runs nothing after the start; do it in the command itself, or before it with ExecStartPre=",
	"ExecReload":    "drover ignores it: drover has no reload; `drover run` with a changed unit replaces the instance",
	"ExecCondition": "drover does not run it; use ExecStartPre= (its failure fails the start)",
	"EnvironmentFile": "drover does not read it: the file would be read on whichever node runs the job, and its variables are not set; " +
		"put them in Environment= lines",
	"PassEnvironment": ignoredEnv, "UnsetEnvironment": ignoredEnv,
	"Group": "drover ignores it: the command runs as User= (or as the agent's user) with that user's group", "SupplementaryGroups": ignoredExec,
	"DynamicUser":     "drover ignores it: the command runs as User= (or as the agent's user)",
	"RemainAfterExit": "drover ignores it: a Type=oneshot unit is a batch job, complete once its command succeeds",
	"PIDFile":         ignoredMain, "BusName": ignoredMain, "NotifyAccess": ignoredMain, "WatchdogSec": ignoredMain,
	"GuessMainPID": ignoredMain, "FileDescriptorStoreMax": ignoredMain, "OOMPolicy": ignoredMain, "Sockets": ignoredMain,
	"ExitType": ignoredMain, "USBFunctionDescriptors": ignoredMain, "USBFunctionStrings": ignoredMain,
	"SendSIGHUP": ignoredKill, "FinalKillSignal": ignoredKill, "RestartKillSignal": ignoredKill, "WatchdogSignal": ignoredKill,
	"TimeoutAbortSec": ignoredKill, "TimeoutStopFailureMode": ignoredKill, "TimeoutStartFailureMode": ignoredKill,
	"SuccessExitStatus": ignoredExit, "RestartPreventExitStatus": ignoredExit, "RestartForceExitStatus": ignoredExit,
	"RuntimeMaxSec": ignoredHost, "RuntimeRandomizedExtraSec": ignoredHost, "RestartSteps": ignoredHost,
	"RestartMaxDelaySec": ignoredHost, "Slice": ignoredResource, "Delegate": ignoredResource,
	"UMask": ignoredExec, "Nice": ignoredExec, "OOMScoreAdjust": ignoredExec, "CPUAffinity": ignoredExec,
	"RootDirectory": ignoredExec, "RootImage": ignoredExec, "MountFlags": ignoredExec, "NoNewPrivileges": ignoredExec,
	"CapabilityBoundingSet": ignoredExec, "AmbientCapabilities": ignoredExec, "SecureBits": ignoredExec,
	"BindPaths": ignoredExec, "BindReadOnlyPaths": ignoredExec, "TemporaryFileSystem": ignoredExec,
	"LockPersonality": ignoredExec, "MemoryDenyWriteExecute": ignoredExec, "PermissionsStartOnly": ignoredExec,
	"RootDirectoryStartOnly": ignoredExec, "TimerSlackNSec": ignoredExec, "Personality": ignoredExec,
	"IgnoreSIGPIPE": ignoredExec, "SELinuxContext": ignoredExec, "AppArmorProfile": ignoredExec,
	"SmackProcessLabel": ignoredExec, "KeyringMode": ignoredExec, "PAMName": ignoredExec, "LoadCredential": ignoredExec,
	"SetCredential": ignoredExec, "NetworkNamespacePath": ignoredExec,
}

// ignoredPrefixes are families of systemd keys, for [Unit] and [Service],
// that drover ignores as a whole.
var ignoredPrefixes = []struct{ prefix, why string }{
	{"Condition", ignoredCheck}, {"Assert", ignoredCheck},
	{"Limit", ignoredLimit},
	{"Memory", ignoredResource}, {"CPUScheduling", ignoredExec}, {"CPU", ignoredResource}, {"StartupCPU", ignoredResource},
	{"BlockIO", ignoredResource}, {"IOScheduling", ignoredExec}, {"IO", ignoredResource}, {"StartupIO", ignoredResource},
	{"Tasks", ignoredResource}, {"IPAddress", ignoredResource}, {"IPAccounting", ignoredResource},
	{"Device", ignoredResource}, {"Allowed", ignoredResource}, {"ManagedOOM", ignoredResource},
	{"Standard", ignoredOutput}, {"Syslog", ignoredOutput}, {"Log", ignoredOutput}, {"TTY", ignoredOutput},
	{"Protect", ignoredExec}, {"Private", ignoredExec}, {"Restrict", ignoredExec}, {"SystemCall", ignoredExec},
	{"ReadOnly", ignoredExec}, {"ReadWrite", ignoredExec}, {"Inaccessible", ignoredExec}, {"Exec", ignoredExec},
	{"Runtime", ignoredExec}, {"State", ignoredExec}, {"Cache", ignoredExec}, {"Logs", ignoredExec},
	{"Configuration", ignoredExec}, {"Utmp", ignoredExec},
}

// ignoredWhy says why drover ignores key, an ordinary systemd key of
// section (Unit or Service), or "" when the key is not one drover knows.
// family is true when only the key's prefix is known: a typo of a key
// drover implements may have it too.
func ignoredWhy(section, key string) (why string, family bool) {
	table := unitIgnoredKeys
	if section == "Service" {
		table = serviceIgnoredKeys
	}
	if why, ok := table[key]; ok {
		return why, false
	}
	for _, p := range ignoredPrefixes {
		if strings.HasPrefix(key, p.prefix) {
			return p.why, true
		}
	}
	return "", false
}

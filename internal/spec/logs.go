package spec

// LogConfig is a task's logs block, as Nomad's: how many files of its
// stdout, and as many of its stderr, the agent keeps (the one being
// written and the rotated ones), each rotated at max_file_size MB, or
// none at all (disabled).
type LogConfig struct {
	MaxFiles      int `json:"max_files,omitempty"`
	MaxFileSizeMB int `json:"max_file_size,omitempty"`
	// Disabled keeps no log files: the task's output is read and thrown
	// away, and asking for its logs says so.
	Disabled bool `json:"disabled,omitempty"`
}

// LogsDisabled reports whether the task keeps no logs.
func (t *Task) LogsDisabled() bool { return t.Logs != nil && t.Logs.Disabled }

// The defaults for a task without a logs block, or a field it leaves
// out: 4 files of 10 MB (Nomad keeps 10).
const (
	DefaultLogMaxFiles      = 4
	DefaultLogMaxFileSizeMB = 10
	// MaxLogFiles bounds max_files; MaxLogFileSizeMB max_file_size.
	MaxLogFiles      = 1000
	MaxLogFileSizeMB = 1 << 20
)

// LogLimits returns how many files of each stream a task keeps and the
// size in bytes each is rotated at.
func (t *Task) LogLimits() (files int, bytes int64) {
	files, mb := DefaultLogMaxFiles, DefaultLogMaxFileSizeMB
	if l := t.Logs; l != nil {
		if l.MaxFiles > 0 {
			files = l.MaxFiles
		}
		if l.MaxFileSizeMB > 0 {
			mb = l.MaxFileSizeMB
		}
	}
	return files, int64(mb) << 20
}

func validateLogs(ps *Problems, path string, t *Task) {
	l := t.Logs
	if l == nil {
		return
	}
	if l.MaxFiles < 0 || l.MaxFiles > MaxLogFiles {
		ps.Add(path+".logs.max_files", "max_files %d is out of range; use 1 to %d (the file being written counts)", l.MaxFiles, MaxLogFiles)
	}
	if l.MaxFileSizeMB < 0 || l.MaxFileSizeMB > MaxLogFileSizeMB {
		ps.Add(path+".logs.max_file_size", "max_file_size %d MB is out of range; use 1 to %d", l.MaxFileSizeMB, MaxLogFileSizeMB)
	}
}

package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// writePayload writes a dispatched job's payload into the task's local/
// directory as its dispatch_payload's file, before each start. The file
// is opened through an os.Root on local/, so no path or symbolic link
// leads outside it.
func (tr *taskRunner) writePayload() error {
	dp := tr.task.DispatchPayload
	if dp == nil {
		return nil
	}
	if err := tr.makeDirs(); err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Join(tr.dir, localDirName))
	if err != nil {
		return fmt.Errorf("dispatch payload: %w", err)
	}
	defer root.Close()
	if dir := filepath.Dir(dp.File); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("dispatch payload: cannot create local/%s: %w", dir, err)
		}
	}
	if err := root.WriteFile(dp.File, tr.ar.alloc.Payload, 0o644); err != nil {
		return fmt.Errorf("dispatch payload: cannot write local/%s: %w", dp.File, err)
	}
	return nil
}

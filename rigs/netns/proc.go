package netns

import (
	"fmt"
	"os/exec"
)

// Start starts cmd with the namespace as its network namespace. The child
// is forked from a thread locked inside the namespace and inherits it. The
// process is tracked: LeakCheck fails while it is still running, and Delete
// kills it with the namespace.
func (n *NS) Start(cmd *exec.Cmd) error {
	err := n.Do(func() error { return cmd.Start() })
	if err != nil {
		return fmt.Errorf("failed to start %s in netns %q: %w", cmd.Path, n.Name, err)
	}
	TrackProcess(cmd.Process.Pid, fmt.Sprintf("%s in %s", cmd.Path, n.Name))
	return nil
}

package registry

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"
)

// Update is what a source delivers: a whole new State, or the error that
// stopped the source from producing one. After an error the consumer keeps
// the last State it had.
type Update struct {
	State *State
	Err   error
}

// Source produces the mesh model. Watch sends the current State (or the
// error reading it) first and then one Update per change, until ctx ends.
// The channel is closed when Watch returns.
type Source interface {
	Watch(ctx context.Context) <-chan Update
}

// FileSource is a scenario file, re-read when its content changes. It polls
// rather than using inotify so that the editors' and rigs' atomic
// rename-into-place, a bind-mounted file and a plain overwrite all count as a
// change alike. Writers should replace the file atomically (write a
// temporary file, rename it over); for a plain overwrite the source waits
// until two reads agree, so a half-written file is not taken for a mesh.
type FileSource struct {
	Path     string
	Interval time.Duration // default 250ms
}

func (f *FileSource) Watch(ctx context.Context) <-chan Update {
	ch := make(chan Update, 1)
	interval := f.Interval
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	go func() {
		defer close(ch)
		var last []byte
		first := true
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			data, err := f.read(interval)
			changed := first || err != nil && last != nil || err == nil && !bytes.Equal(data, last)
			if changed {
				var u Update
				if err != nil {
					u.Err = fmt.Errorf("failed to read scenario file %q: %w", f.Path, err)
					last = nil
				} else {
					last = data
					u.State, u.Err = ParseScenario(f.Path, data)
				}
				first = false
				select {
				case ch <- u:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// read returns the file's content once two reads a short settle apart agree.
func (f *FileSource) read(interval time.Duration) ([]byte, error) {
	settle := interval / 4
	if settle < 5*time.Millisecond {
		settle = 5 * time.Millisecond
	}
	prev, err := os.ReadFile(f.Path)
	for i := 0; i < 20 && err == nil; i++ {
		time.Sleep(settle)
		var cur []byte
		if cur, err = os.ReadFile(f.Path); err == nil && bytes.Equal(cur, prev) {
			return cur, nil
		}
		prev = cur
	}
	return prev, err
}

package registry

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"
)

// WithExports is src with the remote services of the export files at
// paths (ParseExport's format) set on every State it delivers. Each file
// is polled as FileSource polls a scenario; a change of any delivers the
// last State of src again with the new remotes. A file that cannot be
// read or parsed delivers its error once and its last good content stays
// in force: a peer cluster's broken export must not withdraw services that
// worked, nor stop the local cluster's own changes. Before a file was ever
// read well, it contributes nothing.
func WithExports(src Source, paths []string, interval time.Duration) Source {
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	return &exportsSource{src: src, paths: paths, interval: interval}
}

type exportsSource struct {
	src      Source
	paths    []string
	interval time.Duration
}

type exportFile struct {
	path   string
	raw    []byte // the last content read, good or bad
	good   []RemoteService
	failed bool
}

func (s *exportsSource) Watch(ctx context.Context) <-chan Update {
	out := make(chan Update, 1)
	go func() {
		defer close(out)
		in := s.src.Watch(ctx)
		files := make([]*exportFile, len(s.paths))
		for i, p := range s.paths {
			files[i] = &exportFile{path: p}
		}
		var last *State
		t := time.NewTicker(s.interval)
		defer t.Stop()
		send := func(u Update) bool {
			select {
			case out <- u:
				return true
			case <-ctx.Done():
				return false
			}
		}
		// The first poll happens before the first State goes out, so an
		// agent starts with the remotes it can read, not without them.
		errs := pollExports(files)
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-in:
				if !ok {
					return
				}
				if u.Err != nil {
					if !send(u) {
						return
					}
					continue
				}
				last = u.State
			case <-t.C:
				var changed bool
				if errs, changed = pollExportsChanged(files); !changed && len(errs) == 0 {
					continue
				}
				if last == nil && len(errs) == 0 {
					continue
				}
			}
			for _, err := range errs {
				if !send(Update{Err: err}) {
					return
				}
			}
			errs = nil
			if last == nil {
				continue
			}
			st, err := merged(last, files)
			if !send(Update{State: st, Err: err}) {
				return
			}
		}
	}()
	return out
}

// pollExports reads every file; it returns the errors of those that
// failed.
func pollExports(files []*exportFile) []error {
	errs, _ := pollExportsChanged(files)
	return errs
}

// pollExportsChanged reads every file and reports whether any content
// changed, with the error of each file that newly failed.
func pollExportsChanged(files []*exportFile) ([]error, bool) {
	var errs []error
	changed := false
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err == nil && bytes.Equal(data, f.raw) && f.raw != nil {
			continue
		}
		if err != nil {
			if !f.failed {
				f.failed = true
				errs = append(errs, fmt.Errorf("failed to read export file %q (its last good content stays): %w", f.path, err))
			}
			continue
		}
		f.raw = data
		rs, _, perr := ParseExport(f.path, data)
		if perr != nil {
			f.failed = true
			errs = append(errs, fmt.Errorf("%w (its last good content stays)", perr))
			continue
		}
		f.failed = false
		f.good = rs
		changed = true
	}
	return errs, changed
}

// merged is a copy of st with the files' remotes; st itself is shared with
// earlier deliveries and is not changed.
func merged(st *State, files []*exportFile) (*State, error) {
	cp := *st
	var all [][]RemoteService
	for _, f := range files {
		all = append(all, f.good)
	}
	if err := cp.WithRemotes(all...); err != nil {
		return nil, err
	}
	return &cp, nil
}

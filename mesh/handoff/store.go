package handoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a directory of records, one file per attachment.
type Dir string

const recordExt = ".json"

// path is the record's file: "<containerID>:<ifname>.json". Neither part may
// hold a ':' (see Ref.Validate), so two attachments never share a file.
func (d Dir) path(r Ref) string {
	return filepath.Join(string(d), r.ContainerID+":"+r.IfName+recordExt)
}

// Write records p, replacing an earlier record of the same attachment.
func (d Dir) Write(p Pod) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("refusing to record pod %s: %w", p.Ref, err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to encode the record of pod %s: %w", &p, err)
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("failed to create the handoff directory %q: %w", d, err)
	}
	f, err := os.CreateTemp(string(d), ".tmp-*")
	if err != nil {
		return fmt.Errorf("failed to create a record in %q: %w", d, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.path(p.Ref))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("failed to write the record of pod %s in %q: %w", &p, d, err)
	}
	return nil
}

// Remove deletes the record of r; existed says whether there was one.
func (d Dir) Remove(r Ref) (existed bool, err error) {
	if err := r.Validate(); err != nil {
		return false, fmt.Errorf("refusing to remove the record of %s: %w", r, err)
	}
	err = os.Remove(d.path(r))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("failed to remove the record of %s: %w", r, err)
	}
	return true, nil
}

// Read returns every record in the directory. A file that is not a valid
// record is not skipped silently: it comes back in bad, with the reason.
func (d Dir) Read() (pods []Pod, bad []error, err error) {
	ents, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list the handoff directory %q: %w", d, err)
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, recordExt) {
			continue // a writer's temporary file, or not ours
		}
		path := filepath.Join(string(d), name)
		p, err := readRecord(path)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if want := d.path(p.Ref); want != path {
			bad = append(bad, fmt.Errorf("record %q: holds attachment %s, whose record is %q", path, p.Ref, want))
			continue
		}
		pods = append(pods, p)
	}
	return pods, bad, nil
}

func readRecord(path string) (Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Pod{}, fmt.Errorf("failed to read record %q: %w", path, err)
	}
	p, err := DecodePod(bytes.NewReader(data))
	if err != nil {
		return Pod{}, fmt.Errorf("record %q: %w", path, err)
	}
	return p, nil
}

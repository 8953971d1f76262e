// Package pairstate is the agent's persisted demand set: the
// (source account, destination) pairs whose QUIC twins a node's proxy
// asked for, live or dormant, kept in <state-dir>/observed-upstreams.json
// so that a restarted agent carries them over (ARCHITECTURE.md,
// "On-demand twins").
package pairstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// File is the state file's name in the agent's state dir.
const File = "observed-upstreams.json"

// State is the demand set: pairs whose twin is served (Live) and pairs
// kept while their source or destination is away (Dormant).
type State struct {
	Live, Dormant []xdsnames.Twin
}

// observedUpstreams is the file's shape; each entry is a twin cluster name.
type observedUpstreams struct {
	QUICPairs        []string `json:"quic_pairs"`
	DormantQUICPairs []string `json:"dormant_quic_pairs"`
}

// Decode reads a state file. Anything it does not fully understand is
// refused, naming the field and the entry's index: an unknown field, a
// name that is not a twin, a pair listed twice, trailing data.
func Decode(data []byte) (State, error) {
	var ou observedUpstreams
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ou); err != nil {
		return State{}, fmt.Errorf("not an observed-upstreams object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return State{}, errors.New("trailing data after the observed-upstreams object")
	}
	seen := map[xdsnames.Twin]string{}
	var st State
	for _, l := range []struct {
		field string
		names []string
		into  *[]xdsnames.Twin
	}{{"quic_pairs", ou.QUICPairs, &st.Live}, {"dormant_quic_pairs", ou.DormantQUICPairs, &st.Dormant}} {
		for i, name := range l.names {
			t, err := xdsnames.ParseTwin(name)
			if err != nil {
				return State{}, fmt.Errorf("%s[%d]: %w", l.field, i, err)
			}
			if where, dup := seen[t]; dup {
				return State{}, fmt.Errorf("%s[%d]: %q is already listed in %s", l.field, i, name, where)
			}
			seen[t] = fmt.Sprintf("%s[%d]", l.field, i)
			*l.into = append(*l.into, t)
		}
	}
	return st, nil
}

// Encode is st as the file holds it: names sorted, both lists present.
func Encode(st State) ([]byte, error) {
	ou := observedUpstreams{QUICPairs: names(st.Live), DormantQUICPairs: names(st.Dormant)}
	b, err := json.MarshalIndent(ou, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to encode observed upstreams: %w", err)
	}
	return append(b, '\n'), nil
}

func names(ts []xdsnames.Twin) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, xdsnames.TwinCluster(t))
	}
	slices.Sort(out)
	return out
}

// Write replaces dir's state file with st atomically: a temporary file in
// dir, written and synced, renamed over the old one, then the directory
// synced, so a crash leaves the old file or the new one, never a torn one.
func Write(dir string, st State) (err error) {
	b, err := Encode(st)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create state dir %q: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+File+".tmp-*")
	if err != nil {
		return fmt.Errorf("failed to create a temporary state file in %q: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("failed to write %q: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("failed to sync %q: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to close %q: %w", tmp.Name(), err)
	}
	dst := filepath.Join(dir, File)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("failed to rename %q to %q: %w", tmp.Name(), dst, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("failed to open state dir %q to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("failed to sync state dir %q: %w", dir, err)
	}
	return nil
}

// CorruptError is a state file that could not be read or decoded. It was
// moved aside to MovedTo (empty if that failed too), never replaced in
// place: an operator can still read what it held.
type CorruptError struct {
	Path, MovedTo string
	Err           error
}

func (e *CorruptError) Error() string {
	if e.MovedTo == "" {
		return fmt.Sprintf("state file %q is unusable and could not be moved aside: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("state file %q is unusable, moved aside to %q: %v", e.Path, e.MovedTo, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Load reads dir's state file. No file is an empty state. A file that
// cannot be read or decoded is renamed to <file>.corrupt-<unix time of
// now> and reported as a *CorruptError, with an empty state.
func Load(dir string, now time.Time) (State, error) {
	path := filepath.Join(dir, File)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err == nil {
		var st State
		if st, err = Decode(data); err == nil {
			return st, nil
		}
	}
	ce := &CorruptError{Path: path, Err: err}
	aside := fmt.Sprintf("%s.corrupt-%d", path, now.Unix())
	if rerr := os.Rename(path, aside); rerr != nil {
		ce.Err = fmt.Errorf("%w (and moving it aside: %w)", err, rerr)
	} else {
		ce.MovedTo = aside
	}
	return State{}, ce
}

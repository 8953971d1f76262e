package grade

import (
	"fmt"
	"sort"

	"github.com/aether-mesh/aether/rigs/results"
)

// EvidenceFile is one file a grade was graded from, bound by its sha256.
type EvidenceFile struct {
	// Path is the file as the manifest names it (relative to the
	// manifest's folder, so a soak moves as one folder).
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Gates are the gates that read it, so a refusal can say which gate
	// the file's change would move.
	Gates []string `json:"gates"`
}

// bind hashes every file a gate read, in path order.
func (l *loader) bind() ([]EvidenceFile, error) {
	out := make([]EvidenceFile, 0, len(l.read))
	for p, gates := range l.read {
		sum, err := results.FileSHA256(l.m.Resolve(p))
		if err != nil {
			return nil, fmt.Errorf("evidence file %s: %w", p, err)
		}
		f := EvidenceFile{Path: p, SHA256: sum}
		for name := range gates {
			f.Gates = append(f.Gates, name)
		}
		sort.Strings(f.Gates)
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

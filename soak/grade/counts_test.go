package grade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/soak/manifest"
)

// An exclusion that starts between two samples cannot say whether the
// restart counted in (00:01, 00:02] happened inside it: refused, naming the
// gate, the exclusion and the samples either side.
func TestAnExclusionOffTheSampleGridIsRefused(t *testing.T) {
	dir := t.TempDir()
	prom := `{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"restarts"},"values":[[1790812800,"0"],[1790812860,"0"],[1790812920,"1"],[1790812980,"1"]]}]}}`
	if err := os.WriteFile(filepath.Join(dir, "m.json"), []byte(prom), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Name: "c", Builds: []string{"b"}, Start: t0, End: t0.Add(3 * time.Minute), Dir: dir, Path: filepath.Join(dir, "m.yaml"),
		Excluded: []manifest.Excluded{{Name: "roll", Start: t0.Add(90 * time.Second), End: t0.Add(3 * time.Minute), Reason: "planned roll"}},
		Gates: manifest.Gates{Counts: []manifest.CountGate{{Name: "proxy crashes", ApplyExclusions: true,
			Series: &manifest.Series{Prometheus: "m.json", Match: map[string]string{"__name__": "restarts"}}}}},
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := Run(m)
	want := `proxy crashes in roll: boundary 2026-10-01T00:01:30Z is not a sample time of series {__name__="restarts"} (nearest samples 2026-10-01T00:01:00Z and 2026-10-01T00:02:00Z)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant an error containing %s", err, want)
	}
}

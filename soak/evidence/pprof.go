package evidence

import (
	"fmt"
	"os"
	"time"

	"github.com/google/pprof/profile"
)

// CPUProfile is the CPU time a pprof profile accounts for, over the span it
// was taken.
type CPUProfile struct {
	Source     string
	Start      time.Time
	Duration   time.Duration
	CPUSeconds float64
}

// LoadCPUProfile reads a pprof CPU profile (gzipped protobuf, as Go's
// runtime/pprof, Pyroscope exports and `perf`-converted profiles write it)
// and sums its cpu/nanoseconds sample values.
func LoadCPUProfile(path string) (CPUProfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return CPUProfile{}, fmt.Errorf("failed to open CPU profile: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return CPUProfile{}, fieldErr(path, 0, "(profile)", "not a pprof profile", err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		var types []string
		for _, st := range p.SampleType {
			types = append(types, st.Type+"/"+st.Unit)
		}
		return CPUProfile{}, fieldErr(path, 0, "sample_type", fmt.Sprintf("no cpu/nanoseconds sample type (has %v): not a CPU profile", types), nil)
	}
	if p.TimeNanos == 0 || p.DurationNanos <= 0 {
		return CPUProfile{}, fieldErr(path, 0, "time_nanos/duration_nanos", "unset: the profile does not say which span it covers", nil)
	}
	var ns int64
	for i, s := range p.Sample {
		if v := s.Value[idx]; v < 0 {
			return CPUProfile{}, fieldErr(path, 0, fmt.Sprintf("sample[%d].value[%d]", i, idx), fmt.Sprintf("negative CPU time %d", v), nil)
		}
		ns += s.Value[idx]
	}
	return CPUProfile{
		Source:     path,
		Start:      time.Unix(0, p.TimeNanos).UTC(),
		Duration:   time.Duration(p.DurationNanos),
		CPUSeconds: float64(ns) / 1e9,
	}, nil
}

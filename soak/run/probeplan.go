package run

import (
	"fmt"
	"math"
	"time"
)

// ProbePlan spreads the liveness probes over the prober pods: each pod
// probes every Every, its ticks offset from the others' so the probes
// arrive evenly.
type ProbePlan struct {
	Pods  int
	Every time.Duration
}

// MinProbeEvery is the shortest interval one pod probes at. Each probe is
// a new connection through the pod's capture; a pod asked for more than
// a thousand a second would wrap its ephemeral ports within the
// connections' TIME_WAIT, and the probes would fail for the prober's
// reasons, not the mesh's.
const MinProbeEvery = time.Millisecond

// PlanProbes plans rate probes per second over pods prober pods. The
// interval is rounded down to the microsecond, so the plan probes at
// least at rate.
func PlanProbes(rate float64, pods int) (ProbePlan, error) {
	if pods <= 0 {
		return ProbePlan{}, fmt.Errorf("probe rate %g/s: no prober pod to probe from", rate)
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return ProbePlan{}, fmt.Errorf("probe rate %g/s: must be positive", rate)
	}
	every := (time.Duration(float64(pods) / rate * float64(time.Second))).Truncate(time.Microsecond)
	if every < MinProbeEvery {
		return ProbePlan{}, fmt.Errorf("probe rate %g/s over %d pod(s) is one probe every %s from each, faster than the %s a pod can keep (add prober pods)",
			rate, pods, every, MinProbeEvery)
	}
	return ProbePlan{Pods: pods, Every: every}, nil
}

// Rate is the plan's probes per second over every pod.
func (p ProbePlan) Rate() float64 {
	if p.Every <= 0 {
		return 0
	}
	return float64(p.Pods) / p.Every.Seconds()
}

// In is how many probes the plan starts in [0, d): each pod's first tick
// comes one interval (plus its offset) after the start.
func (p ProbePlan) In(d time.Duration) int64 {
	if p.Every <= 0 {
		return 0
	}
	var n int64
	for i := range p.Pods {
		offset := p.Every * time.Duration(i) / time.Duration(p.Pods)
		if d > offset {
			n += int64((d - offset - 1) / p.Every)
		}
	}
	return n
}

func (p ProbePlan) String() string {
	return fmt.Sprintf("%.0f probes/s (%d pod(s), each every %s)", p.Rate(), p.Pods, p.Every)
}

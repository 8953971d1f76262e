package grade

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
	"github.com/aether-mesh/aether/soak/stats"
)

// Window is a measured window of the CPU gate.
type Window struct {
	Name           string    `json:"name"`
	Protocol       string    `json:"protocol"`
	Build          string    `json:"build"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	CPUSource      string    `json:"cpu_source"`
	CPUSeconds     float64   `json:"cpu_seconds"`
	ProxyRequests  float64   `json:"proxy_requests"`
	ClientRequests float64   `json:"client_requests"`
	// CPUPerRequestMS is proxy CPU milliseconds per proxied request.
	CPUPerRequestMS float64 `json:"cpu_per_request_ms"`
	AchievedRPS     float64 `json:"achieved_rps"`
	Valid           bool    `json:"valid"`
	Invalid         string  `json:"invalid,omitempty"`
}

// Pair is one matched (h2, h3) pair of windows.
type Pair struct {
	H2    string  `json:"h2"`
	H3    string  `json:"h3"`
	Ratio float64 `json:"ratio"`
	Used  bool    `json:"used"`
	// Reason says why an unused pair was left out.
	Reason string `json:"reason,omitempty"`
}

// CPURatio is the evidence behind the h3/h2 gate.
type CPURatio struct {
	Max        float64  `json:"max"`
	TargetRPS  float64  `json:"target_rps"`
	Windows    []Window `json:"windows"`
	Pairs      []Pair   `json:"pairs"`
	Ratio      float64  `json:"ratio"`
	Lower      float64  `json:"lower"`
	Upper      float64  `json:"upper"`
	Confidence float64  `json:"confidence"`
	Bounded    bool     `json:"bounded"`
	// Method names the statistics, for the reader.
	Method string `json:"method"`
}

const cpuGateName = "h3/h2 per-request proxy CPU"

func gradeCPU(m *manifest.Manifest, ev *loader) (*CPURatio, Gate, error) {
	cfg := m.Gates.CPURatio
	res := &CPURatio{Max: cfg.Max, TargetRPS: m.TargetRPS,
		Method: fmt.Sprintf("Hodges–Lehmann estimate of log(h3/h2) over matched pairs, exact Wilcoxon signed-rank %.0f%% interval", cfg.Confidence*100)}
	gate := Gate{Name: cpuGateName, Verdict: Refused}
	limit := fmt.Sprintf("limit ≤ %.2f×", cfg.Max)

	// Pairing comes first: windows that cannot be paired are refused
	// before anything is measured, so no ratio across builds is ever
	// printed (the 3.3× of rev242 vs rev239 was exactly such a number).
	ws := m.Windows
	if len(ws)%2 == 1 {
		gate.Figure = limit
		gate.Reason = fmt.Sprintf("%d windows cannot be paired: window %s has no partner", len(ws), ws[len(ws)-1].Name)
		return res, gate, nil
	}
	var builds, protos []string
	for i := 0; i < len(ws); i += 2 {
		a, b := ws[i], ws[i+1]
		if a.Build != b.Build {
			builds = append(builds, fmt.Sprintf("%s (%s) ran %s but %s (%s) ran %s", a.Name, a.Protocol, a.Build, b.Name, b.Protocol, b.Build))
		}
		if a.Protocol == b.Protocol {
			protos = append(protos, fmt.Sprintf("%s and %s are both %s", a.Name, b.Name, a.Protocol))
		}
	}
	switch {
	case len(builds) > 0:
		gate.Figure = limit
		gate.Reason = "windows from different builds cannot be paired (a ratio across builds measures the builds, not the protocol): " +
			strings.Join(builds, "; ")
		return res, gate, nil
	case len(protos) > 0:
		gate.Figure = limit
		gate.Reason = "each pair needs one h2 and one h3 window: " + strings.Join(protos, "; ")
		return res, gate, nil
	}

	var proxyCPU, proxyReq, clientReq []evidence.Series
	var err error
	if m.Sources.ProxyCPU != nil {
		if proxyCPU, err = ev.series(m.Sources.ProxyCPU); err != nil {
			return nil, Gate{}, fmt.Errorf("sources.proxy_cpu: %w", err)
		}
	}
	if proxyReq, err = ev.series(m.Sources.ProxyRequests); err != nil {
		return nil, Gate{}, fmt.Errorf("sources.proxy_requests: %w", err)
	}
	if clientReq, err = ev.series(m.Sources.ClientRequests); err != nil {
		return nil, Gate{}, fmt.Errorf("sources.client_requests: %w", err)
	}
	for _, w := range ws {
		win, err := measureWindow(m, w, proxyCPU, proxyReq, clientReq)
		if err != nil {
			return nil, Gate{}, err
		}
		res.Windows = append(res.Windows, win)
	}

	var logs []float64
	for i := 0; i < len(res.Windows); i += 2 {
		a, b := res.Windows[i], res.Windows[i+1]
		h2, h3 := a, b
		if a.Protocol == manifest.H3 {
			h2, h3 = b, a
		}
		p := Pair{H2: h2.Name, H3: h3.Name}
		switch {
		case !h2.Valid:
			p.Reason = fmt.Sprintf("%s invalid: %s", h2.Name, h2.Invalid)
		case !h3.Valid:
			p.Reason = fmt.Sprintf("%s invalid: %s", h3.Name, h3.Invalid)
		default:
			p.Used = true
			p.Ratio = h3.CPUPerRequestMS / h2.CPUPerRequestMS
			logs = append(logs, math.Log(p.Ratio))
		}
		if !p.Used && h2.CPUPerRequestMS > 0 {
			p.Ratio = h3.CPUPerRequestMS / h2.CPUPerRequestMS
		}
		res.Pairs = append(res.Pairs, p)
	}
	gate.Verdict = Inconclusive
	need := stats.MinPairs(cfg.Confidence)
	if len(logs) == 0 {
		gate.Figure = limit
		gate.Reason = fmt.Sprintf("no valid pair of %d: nothing was measured", len(res.Pairs))
		return res, gate, nil
	}
	iv, err := stats.HodgesLehmann(logs, cfg.Confidence)
	if err != nil {
		return nil, Gate{}, err
	}
	res.Ratio, res.Lower, res.Upper = math.Exp(iv.Estimate), math.Exp(iv.Lower), math.Exp(iv.Upper)
	res.Confidence, res.Bounded = iv.Confidence, iv.Bounded
	if !iv.Bounded {
		gate.Figure = fmt.Sprintf("%.2f× (no interval), %s", res.Ratio, limit)
		gate.Reason = fmt.Sprintf("%d valid pair(s) of %d: an exact %.0f%% interval needs at least %d", len(logs), len(res.Pairs), cfg.Confidence*100, need)
		return res, gate, nil
	}
	gate.Figure = fmt.Sprintf("%.2f× [%.2f, %.2f] (%.1f%% exact, %d pairs), %s", res.Ratio, res.Lower, res.Upper, res.Confidence*100, len(logs), limit)
	switch {
	case res.Upper <= cfg.Max:
		gate.Verdict = Pass
		gate.Reason = fmt.Sprintf("upper bound %.3f ≤ %.2f", res.Upper, cfg.Max)
	case res.Lower > cfg.Max:
		gate.Verdict = Fail
		gate.Reason = fmt.Sprintf("lower bound %.3f > %.2f", res.Lower, cfg.Max)
	default:
		gate.Reason = fmt.Sprintf("interval [%.3f, %.3f] straddles %.2f: more pairs are needed to decide", res.Lower, res.Upper, cfg.Max)
	}
	if n := len(res.Pairs) - len(logs); n > 0 {
		gate.Reason += fmt.Sprintf("; %d pair(s) left out for invalid windows", n)
	}
	return res, gate, nil
}

// profileSlack is how far a profile may start before or end after its
// window: collectors align to their own ticks.
const profileSlack = 5 * time.Second

func measureWindow(m *manifest.Manifest, w manifest.Window, proxyCPU, proxyReq, clientReq []evidence.Series) (Window, error) {
	out := Window{Name: w.Name, Protocol: w.Protocol, Build: w.Build, Start: w.Start, End: w.End}
	secs := w.End.Sub(w.Start).Seconds()
	if len(w.CPUProfiles) > 0 {
		var covered time.Duration
		for _, p := range w.CPUProfiles {
			prof, err := evidence.LoadCPUProfile(m.Resolve(p))
			if err != nil {
				return Window{}, fmt.Errorf("window %s: %w", w.Name, err)
			}
			end := prof.Start.Add(prof.Duration)
			if prof.Start.Before(w.Start.Add(-profileSlack)) || end.After(w.End.Add(profileSlack)) {
				return Window{}, fmt.Errorf("window %s: profile %s covers %s .. %s, outside the window %s .. %s",
					w.Name, p, prof.Start.Format(time.RFC3339), end.Format(time.RFC3339), w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339))
			}
			covered += prof.Duration
			out.CPUSeconds += prof.CPUSeconds
		}
		out.CPUSource = fmt.Sprintf("pprof (%d profile(s))", len(w.CPUProfiles))
		if covered.Seconds() < 0.99*secs {
			out.Invalid = fmt.Sprintf("profiles cover %.0f s of the window's %.0f s", covered.Seconds(), secs)
		}
	} else {
		if !evidence.Covers(proxyCPU, w.Start, w.End) {
			out.Invalid = "proxy CPU samples do not cover the window"
		}
		out.CPUSeconds = evidence.Increase(proxyCPU, w.Start, w.End)
		out.CPUSource = "prometheus " + evidence.FormatMatch(m.Sources.ProxyCPU.Match)
	}
	if !evidence.Covers(proxyReq, w.Start, w.End) || !evidence.Covers(clientReq, w.Start, w.End) {
		out.Invalid = join(out.Invalid, "request counters do not cover the window")
	}
	out.ProxyRequests = evidence.Increase(proxyReq, w.Start, w.End)
	out.ClientRequests = evidence.Increase(clientReq, w.Start, w.End)
	out.AchievedRPS = out.ClientRequests / secs
	if out.ProxyRequests > 0 {
		out.CPUPerRequestMS = out.CPUSeconds / out.ProxyRequests * 1000
	}
	cfg := m.Gates.CPURatio
	if out.AchievedRPS < cfg.MinAchieved*m.TargetRPS {
		out.Invalid = join(out.Invalid, fmt.Sprintf("achieved %.1f rps < %.0f%% of target %.0f rps", out.AchievedRPS, cfg.MinAchieved*100, m.TargetRPS))
	}
	switch {
	case out.ClientRequests == 0 || out.ProxyRequests == 0:
		out.Invalid = join(out.Invalid, fmt.Sprintf("no requests (proxy %.0f, client %.0f)", out.ProxyRequests, out.ClientRequests))
	case math.Abs(out.ProxyRequests-out.ClientRequests)/out.ClientRequests > cfg.MaxCountSkew:
		out.Invalid = join(out.Invalid, fmt.Sprintf("proxy counted %.0f requests, client sent %.0f (%.2f%% apart > %.1f%%)",
			out.ProxyRequests, out.ClientRequests, 100*math.Abs(out.ProxyRequests-out.ClientRequests)/out.ClientRequests, cfg.MaxCountSkew*100))
	}
	if out.CPUSeconds <= 0 && out.Invalid == "" {
		out.Invalid = "no CPU time recorded"
	}
	out.Valid = out.Invalid == ""
	return out, nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

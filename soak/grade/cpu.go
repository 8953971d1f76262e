package grade

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
	"github.com/aether-mesh/aether/soak/stats"
)

// Window is a measured window of the CPU gate. A figure is nil when it was
// never measured: a counter whose samples do not span the window, or CPU
// profiles that cover only part of it. Such a window is invalid, and the
// report shows "not measured" in place of a number nobody observed.
type Window struct {
	Name           string    `json:"name"`
	Protocol       string    `json:"protocol"`
	Build          string    `json:"build"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	CPUSource      string    `json:"cpu_source"`
	CPUSeconds     *float64  `json:"cpu_seconds"`
	ProxyRequests  *float64  `json:"proxy_requests"`
	ClientRequests *float64  `json:"client_requests"`
	// CPUPerRequestMS is proxy CPU milliseconds per proxied request.
	CPUPerRequestMS *float64 `json:"cpu_per_request_ms"`
	AchievedRPS     *float64 `json:"achieved_rps"`
	Valid           bool     `json:"valid"`
	Invalid         string   `json:"invalid,omitempty"`
}

// Pair is one matched (h2, h3) pair of windows, formed in declared order:
// windows 1 and 2, 3 and 4, and so on (manifest.Window).
type Pair struct {
	H2 string `json:"h2"`
	H3 string `json:"h3"`
	// Ratio is h3/h2 CPU per request, present only for a pair that is
	// used: a left-out pair's quotient is not part of any estimate.
	Ratio float64 `json:"ratio,omitempty"`
	Used  bool    `json:"used"`
	// Reason says why an unused pair was left out.
	Reason string `json:"reason,omitempty"`
}

// CPURatio is the evidence behind the h3/h2 gate.
type CPURatio struct {
	Max       float64  `json:"max"`
	TargetRPS float64  `json:"target_rps"`
	Windows   []Window `json:"windows"`
	Pairs     []Pair   `json:"pairs"`
	Ratio     float64  `json:"ratio"`
	// Lower and Upper bound the interval; without an interval (Bounded
	// false) they are absent.
	Lower      float64 `json:"lower,omitempty"`
	Upper      float64 `json:"upper,omitempty"`
	Confidence float64 `json:"confidence"`
	Bounded    bool    `json:"bounded"`
	// Method names the statistics, for the reader.
	Method string `json:"method"`
}

// cpuSources are the series the CPU gate reads; proxyCPU is nil when every
// window has its own profiles.
type cpuSources struct {
	proxyCPU, proxyReq, clientReq []evidence.Series
}

func gradeCPU(m *manifest.Manifest, ev *loader) (*CPURatio, Gate, error) {
	cfg := m.Gates.CPURatio
	res := &CPURatio{Max: cfg.Max, TargetRPS: m.TargetRPS,
		Method: fmt.Sprintf("Hodges–Lehmann estimate of log(h3/h2) over matched pairs, exact Wilcoxon signed-rank %.0f%% interval", cfg.Confidence*100)}
	refuse := func(reason string) (*CPURatio, Gate, error) {
		return res, Gate{Name: GateCPURatio, Verdict: Refused, Figure: fmt.Sprintf("limit ≤ %.2f×", cfg.Max), Reason: reason}, nil
	}
	// Refusals come before anything is measured, so no ratio across
	// builds is ever printed (the 3.3× of rev242 vs rev239 was exactly
	// such a number). The manifest has already checked the ABBA order.
	if r := crossBuildPairs(m.Windows); r != "" {
		return refuse(r)
	}
	src, err := loadCPUSources(m, ev)
	if err != nil {
		return nil, Gate{}, err
	}
	if r := sharedRequestSeries(m, src); r != "" {
		return refuse(r)
	}
	for _, w := range m.Windows {
		win, err := measureWindow(m, ev, w, src)
		if err != nil {
			return nil, Gate{}, fmt.Errorf("window %s: %w", w.Name, err)
		}
		res.Windows = append(res.Windows, win)
	}
	logs := pairUp(res)
	gate, err := decideCPU(res, logs, cfg)
	return res, gate, err
}

// crossBuildPairs names every pair whose windows ran different builds.
func crossBuildPairs(ws []manifest.Window) string {
	var builds []string
	for i := 0; i+1 < len(ws); i += 2 {
		a, b := ws[i], ws[i+1]
		if a.Build != b.Build {
			builds = append(builds, fmt.Sprintf("%s (%s) ran %s but %s (%s) ran %s", a.Name, a.Protocol, a.Build, b.Name, b.Protocol, b.Build))
		}
	}
	if len(builds) == 0 {
		return ""
	}
	return "windows from different builds cannot be paired (a ratio across builds measures the builds, not the protocol): " +
		strings.Join(builds, "; ")
}

func loadCPUSources(m *manifest.Manifest, ev *loader) (cpuSources, error) {
	var src cpuSources
	var err error
	if m.Sources.ProxyCPU != nil {
		if src.proxyCPU, err = ev.series(m.Sources.ProxyCPU); err != nil {
			return src, fmt.Errorf("sources.proxy_cpu: %w", err)
		}
	}
	if src.proxyReq, err = ev.series(m.Sources.ProxyRequests); err != nil {
		return src, fmt.Errorf("sources.proxy_requests: %w", err)
	}
	if src.clientReq, err = ev.series(m.Sources.ClientRequests); err != nil {
		return src, fmt.Errorf("sources.client_requests: %w", err)
	}
	return src, nil
}

// sharedRequestSeries names a series that both proxy_requests and
// client_requests select. The count-skew check compares the two; reading
// one counter twice makes it compare a number with itself and pass
// whatever the proxy did.
func sharedRequestSeries(m *manifest.Manifest, src cpuSources) string {
	proxyFile, clientFile := m.Resolve(m.Sources.ProxyRequests.Prometheus), m.Resolve(m.Sources.ClientRequests.Prometheus)
	if proxyFile != clientFile {
		return ""
	}
	for _, p := range src.proxyReq {
		for _, c := range src.clientReq {
			if maps.Equal(p.Labels, c.Labels) {
				return fmt.Sprintf("sources.proxy_requests %s and sources.client_requests %s both select series %s of %s: the count-skew check would compare a counter with itself",
					evidence.FormatMatch(m.Sources.ProxyRequests.Match), evidence.FormatMatch(m.Sources.ClientRequests.Match),
					evidence.FormatMatch(p.Labels), m.Sources.ProxyRequests.Prometheus)
			}
		}
	}
	return ""
}

// pairUp forms the pairs in declared order and returns the log ratios of
// those whose windows are both valid.
func pairUp(res *CPURatio) []float64 {
	var logs []float64
	for i := 0; i+1 < len(res.Windows); i += 2 {
		h2, h3 := res.Windows[i], res.Windows[i+1]
		if h2.Protocol == manifest.H3 {
			h2, h3 = h3, h2
		}
		p := Pair{H2: h2.Name, H3: h3.Name}
		switch {
		case !h2.Valid:
			p.Reason = fmt.Sprintf("%s invalid: %s", h2.Name, h2.Invalid)
		case !h3.Valid:
			p.Reason = fmt.Sprintf("%s invalid: %s", h3.Name, h3.Invalid)
		default:
			p.Used = true
			p.Ratio = *h3.CPUPerRequestMS / *h2.CPUPerRequestMS
			logs = append(logs, math.Log(p.Ratio))
		}
		res.Pairs = append(res.Pairs, p)
	}
	return logs
}

func decideCPU(res *CPURatio, logs []float64, cfg *manifest.CPURatioGate) (Gate, error) {
	limit := fmt.Sprintf("limit ≤ %.2f×", cfg.Max)
	gate := Gate{Name: GateCPURatio, Verdict: Inconclusive, Figure: limit}
	if len(logs) == 0 {
		gate.Reason = fmt.Sprintf("no valid pair of %d: nothing was measured", len(res.Pairs))
		return gate, nil
	}
	iv, err := stats.HodgesLehmann(logs, cfg.Confidence)
	if err != nil {
		return Gate{}, err
	}
	res.Ratio, res.Confidence, res.Bounded = math.Exp(iv.Estimate), iv.Confidence, iv.Bounded
	if !iv.Bounded {
		// Too few pairs for any interval: its bounds are ±Inf, which
		// grade.json cannot hold, and there is no interval to show.
		gate.Figure = fmt.Sprintf("%.2f× (no interval), %s", res.Ratio, limit)
		gate.Reason = fmt.Sprintf("%d valid pair(s) of %d: an exact %.0f%% interval needs at least %d", len(logs), len(res.Pairs), cfg.Confidence*100, stats.MinPairs(cfg.Confidence))
		return gate, nil
	}
	res.Lower, res.Upper = math.Exp(iv.Lower), math.Exp(iv.Upper)
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
	return gate, nil
}

// profileSlack is how far a profile may start before or end after its
// window: collectors align to their own ticks.
const profileSlack = 5 * time.Second

// measureWindow measures one window. A figure that was not measured stays
// nil and makes the window invalid; a boundary off the sample grid is an
// error (evidence.Increase).
func measureWindow(m *manifest.Manifest, ev *loader, w manifest.Window, src cpuSources) (Window, error) {
	out := Window{Name: w.Name, Protocol: w.Protocol, Build: w.Build, Start: w.Start, End: w.End}
	var why []string
	var note string
	var err error
	if len(w.CPUProfiles) > 0 {
		out.CPUSource = fmt.Sprintf("pprof (%d profile(s))", len(w.CPUProfiles))
		out.CPUSeconds, note, err = profileCPU(ev, w)
	} else {
		out.CPUSource = "prometheus " + evidence.FormatMatch(m.Sources.ProxyCPU.Match)
		out.CPUSeconds, note, err = increase(src.proxyCPU, w, "sources.proxy_cpu")
	}
	if err != nil {
		return Window{}, err
	}
	why = appendNote(why, note)
	if out.ProxyRequests, note, err = increase(src.proxyReq, w, "sources.proxy_requests"); err != nil {
		return Window{}, err
	}
	why = appendNote(why, note)
	if out.ClientRequests, note, err = increase(src.clientReq, w, "sources.client_requests"); err != nil {
		return Window{}, err
	}
	why = appendNote(why, note)
	why = append(why, judgeWindow(m, &out)...)
	out.Invalid = strings.Join(why, "; ")
	out.Valid = out.Invalid == ""
	return out, nil
}

// judgeWindow derives the rates from the measured figures and says what,
// among them, makes the window invalid.
func judgeWindow(m *manifest.Manifest, out *Window) []string {
	cfg := m.Gates.CPURatio
	var why []string
	if out.ProxyRequests != nil && out.CPUSeconds != nil && *out.ProxyRequests > 0 {
		out.CPUPerRequestMS = ptr(*out.CPUSeconds / *out.ProxyRequests * 1000)
	}
	if out.CPUSeconds != nil && *out.CPUSeconds <= 0 {
		why = append(why, "no CPU time recorded")
	}
	if out.ProxyRequests == nil || out.ClientRequests == nil {
		return why
	}
	proxy, client := *out.ProxyRequests, *out.ClientRequests
	out.AchievedRPS = ptr(client / out.End.Sub(out.Start).Seconds())
	if *out.AchievedRPS < cfg.MinAchieved*m.TargetRPS {
		why = append(why, fmt.Sprintf("achieved %.1f rps < %.0f%% of target %.0f rps", *out.AchievedRPS, cfg.MinAchieved*100, m.TargetRPS))
	}
	switch {
	case client == 0 || proxy == 0:
		why = append(why, fmt.Sprintf("no requests (proxy %.0f, client %.0f)", proxy, client))
	case math.Abs(proxy-client)/client > cfg.MaxCountSkew:
		why = append(why, fmt.Sprintf("proxy counted %.0f requests, client sent %.0f (%.2f%% apart > %.1f%%)",
			proxy, client, 100*math.Abs(proxy-client)/client, cfg.MaxCountSkew*100))
	}
	return why
}

// increase is a counter's growth over the window, or nil with the reason
// when the counter's samples do not span the window.
func increase(series []evidence.Series, w manifest.Window, source string) (*float64, string, error) {
	v, err := evidence.Increase(series, w.Start, w.End)
	var cov *evidence.CoverageError
	switch {
	case errors.As(err, &cov):
		return nil, fmt.Sprintf("%s not measured: %v", source, err), nil
	case err != nil:
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	return &v, "", nil
}

// profileCPU sums the window's CPU profiles; profiles that cover less of
// the window than it lasted did not measure its CPU.
func profileCPU(ev *loader, w manifest.Window) (*float64, string, error) {
	var covered time.Duration
	var cpu float64
	for _, p := range w.CPUProfiles {
		prof, err := evidence.LoadCPUProfile(ev.file(p))
		if err != nil {
			return nil, "", err
		}
		end := prof.Start.Add(prof.Duration)
		if prof.Start.Before(w.Start.Add(-profileSlack)) || end.After(w.End.Add(profileSlack)) {
			return nil, "", fmt.Errorf("profile %s covers %s .. %s, outside the window %s .. %s",
				p, prof.Start.Format(time.RFC3339), end.Format(time.RFC3339), w.Start.Format(time.RFC3339), w.End.Format(time.RFC3339))
		}
		covered += prof.Duration
		cpu += prof.CPUSeconds
	}
	if secs := w.End.Sub(w.Start).Seconds(); covered.Seconds() < 0.99*secs {
		return nil, fmt.Sprintf("CPU not measured: profiles cover %.0f s of the window's %.0f s", covered.Seconds(), secs), nil
	}
	return &cpu, "", nil
}

func appendNote(why []string, note string) []string {
	if note == "" {
		return why
	}
	return append(why, note)
}

func ptr(v float64) *float64 { return &v }

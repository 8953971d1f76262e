package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/soak/manifest"
)

// cutShort marks the detail of a step that did not run to its end.
const cutShort = "cut short: "

// soak is a run in progress: the cluster, its load, prober and sampler.
type soak struct {
	cfg   Config
	dir   string
	steps []Step
	c     *node.Cluster
	rec   *Recorder
	// res holds the resource gauges when the run has leak gates.
	res     *Recorder
	load    *Load
	prober  *Prober
	sampler *Sampler
	clk     clock
	exec    *executor
	rate    float64
	prog    *progress

	stopSampler, stopProber context.CancelFunc
	samplerDone, proberDone chan struct{}
}

func newSoak(c *node.Cluster, cfg Config, dir string, steps []Step, agentArgs func(string) []string) (*soak, error) {
	sources, listeners, err := loadSources(c, cfg)
	if err != nil {
		return nil, err
	}
	var probers []ProbeTarget
	for _, r := range cfg.Roles.Probers {
		p := c.Pod(cfg.Roles.Namespace, r.Pod)
		if p == nil {
			return nil, fmt.Errorf("prober %q is not a pod of %s", r.Pod, cfg.Scenario)
		}
		probers = append(probers, ProbeTarget{Pod: p, Service: r.Target})
	}
	churn := c.Pod(cfg.Roles.Namespace, cfg.Roles.Churn)
	if churn == nil {
		return nil, fmt.Errorf("churn pod %q is not a pod of %s", cfg.Roles.Churn, cfg.Scenario)
	}
	s := &soak{cfg: cfg, dir: dir, steps: steps, c: c, rec: NewRecorder()}
	if s.load, err = NewLoad(filepath.Join(dir, ResultsFile)); err != nil {
		return nil, err
	}
	if s.prober, err = NewProber(filepath.Join(dir, ProbesFile)); err != nil {
		return nil, errors.Join(err, s.load.Close())
	}
	s.sampler = NewSampler(s.rec, c.Nodes(), listeners)
	if cfg.Leaks != nil {
		s.res = NewRecorder()
		s.sampler.SampleResources(s.res, int(cfg.Leaks.Every/cfg.Tick))
	}
	s.clk = clock{start: time.Now().Add(cfg.Tick).Truncate(cfg.Tick), tick: cfg.Tick}
	s.exec = &executor{c: c, clk: s.clk, mesh: cfg.Mesh, args: agentArgs, load: s.load, sampler: s.sampler,
		churn: churn, churnTo: cfg.Roles.ChurnTarget, prober: s.prober, probeEvery: cfg.DirectInterval}
	// A direct role's SVID is issued at the first network fault it probes,
	// from the CA the agents made by then, valid for the rest of the soak.
	direct := map[DirectRole]*directProber{}
	nodeOf := func(pod string) string {
		if p := c.Pod(cfg.Roles.Namespace, pod); p != nil {
			return p.Node
		}
		return ""
	}
	s.exec.direct = func(node string) (*directProber, error) {
		r, err := cfg.Roles.DirectFor(node, nodeOf)
		if err != nil {
			return nil, err
		}
		if direct[r] == nil {
			d, err := newDirectProber(c, cfg, r, filepath.Join(dir, "cluster", "ca"), cfg.Duration+time.Hour)
			if err != nil {
				return nil, err
			}
			direct[r] = d
		}
		return direct[r], nil
	}
	if s.rate, err = s.load.Start(c, cfg.Mesh, sources, cfg.Rate); err != nil {
		s.load.Stop()
		return nil, errors.Join(err, s.load.Close(), s.prober.Close())
	}
	s.startWatchers(probers)
	// The load's rate is reckoned from its start.
	s.prog = &progress{w: cfg.Progress, tty: cfg.TTY, start: s.clk.start, planned: cfg.Duration, windows: countWindows(steps), lastAt: time.Now()}
	return s, nil
}

// loadSources resolves the load's source pods and, per node, the outbound
// listeners whose requests are theirs.
func loadSources(c *node.Cluster, cfg Config) ([]Source, map[string][]string, error) {
	var sources []Source
	listeners := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Roles.Sources)) {
		p := c.Pod(cfg.Roles.Namespace, name)
		if p == nil {
			return nil, nil, fmt.Errorf("load source %s/%s is not a pod of %s", cfg.Roles.Namespace, name, cfg.Scenario)
		}
		sources = append(sources, Source{Pod: p, Services: cfg.Roles.Sources[name]})
		listeners[p.Node] = append(listeners[p.Node], "http-outbound~"+p.Namespace+"~"+p.Name)
	}
	return sources, listeners, nil
}

// startWatchers starts the sampler on the tick grid and the prober.
func (s *soak) startWatchers(probers []ProbeTarget) {
	var sctx, pctx context.Context
	sctx, s.stopSampler = context.WithCancel(context.Background())
	pctx, s.stopProber = context.WithCancel(context.Background())
	s.samplerDone, s.proberDone = make(chan struct{}), make(chan struct{})
	go func() { s.sampler.Run(sctx, s.clk.start, s.cfg.Tick); close(s.samplerDone) }()
	go func() {
		if err := s.prober.Run(pctx, s.c, s.cfg.Mesh, probers, s.cfg.ProbeInterval); err != nil {
			s.cfg.Logf("prober: %v", err)
		}
		close(s.proberDone)
	}()
}

func countWindows(steps []Step) int {
	n := 0
	for _, st := range steps {
		if st.Kind == Measure {
			n++
		}
	}
	return n
}

func (s *soak) status(windows int, step string) status {
	total, failed := s.load.Counts()
	pt, pf := s.prober.Counts()
	st := status{windowsDone: windows, step: step, load: total, loadErr: failed, probes: pt, pfail: pf, exits: s.sampler.Exits()}
	for _, ser := range s.rec.Values(SeriesNC) {
		st.nc += ser
	}
	return st
}

// execute runs the schedule. It returns the spans that ran and, when the
// schedule did not finish, why.
func (s *soak) execute(ctx context.Context) ([]Span, string) {
	var spans []Span
	windows := 0
	current := make(chan string, 1)
	current <- "starting"
	tickDone := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-tickDone:
				return
			case <-t.C:
				step := <-current
				current <- step
				s.prog.tick(s.status(windows, step))
			}
		}
	}()
	defer func() { close(tickDone); s.prog.done() }()
	for i, st := range s.steps {
		name := SpanName(st, windows+1, i+1)
		<-current
		current <- name
		sp, err := s.exec.run(ctx, st, name)
		if err != nil {
			if !sp.Start.IsZero() {
				sp.Detail = joinWhy(sp.Detail, cutShort+err.Error())
				spans = append(spans, sp)
			}
			if ctx.Err() != nil {
				return spans, fmt.Sprintf("stopped (%v) during step %d of %d, %s", context.Cause(ctx), i+1, len(s.steps), name)
			}
			return spans, err.Error()
		}
		spans = append(spans, sp)
		if st.Kind == Measure {
			windows++
		}
		s.prog.step(s.status(windows, name+" done"))
	}
	return spans, ""
}

// stop waits for the sampler to reach the last span's end (or stops it at
// once when ctx has ended), stops the load and the prober, and
// returns the last tick sampled: the soak's end.
func (s *soak) stop(ctx context.Context, spans []Span) time.Time {
	if n := len(spans); n > 0 {
		s.waitSampled(ctx, spans[n-1].End)
	}
	s.stopSampler()
	<-s.samplerDone
	s.stopProber()
	<-s.proberDone
	s.load.Stop()
	return s.sampler.Last()
}

// waitSampled waits until the sampler has sampled tick t.
func (s *soak) waitSampled(ctx context.Context, t time.Time) {
	for s.sampler.Last().Before(t) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// write finishes the counters and writes the run folder.
func (s *soak) write(spans []Span, end time.Time, partial string) (*Result, error) {
	res := &Result{Dir: s.dir, Partial: partial, Missed: s.sampler.Missed()}
	if err := errors.Join(s.sampler.Finish(s.load, s.prober), s.load.Close(), s.prober.Close()); err != nil {
		return res, err
	}
	if !end.After(s.clk.start) {
		return res, fmt.Errorf("the run stopped before it measured anything (%s)", partial)
	}
	spans = clipSpans(spans, end)
	s.rec.Trim(end)
	if err := s.recordNotRun(end, spans); err != nil {
		return res, err
	}
	planned, err := s.recordProbesShort(end)
	if err != nil {
		return res, err
	}
	if err := s.rec.WriteMatrix(filepath.Join(s.dir, CountersFile)); err != nil {
		return res, err
	}
	if s.res != nil {
		s.res.Trim(end)
		if err := s.res.WriteMatrix(filepath.Join(s.dir, ResourcesFile)); err != nil {
			return res, err
		}
	}
	if err := writeSpans(s.dir, spans); err != nil {
		return res, err
	}
	o := Outline{
		Name: filepath.Base(s.dir), Build: s.cfg.Build, Start: s.clk.start, End: end, TargetRPS: s.rate,
		MaxRatio: s.cfg.MaxRatio, SLO: s.cfg.SLO, PrunedLive: s.rec.Has(SeriesPrunedLive), Partial: partial, DirectInterval: s.cfg.DirectInterval,
		Description: s.description(),
		Graded: []manifest.Event{{Name: "svid-rotation", Start: s.clk.start, End: end,
			What: fmt.Sprintf("SVIDs re-issued every %s (--svid-ttl %s) throughout", s.cfg.SVIDTTL/2, s.cfg.SVIDTTL)}},
	}
	if s.res != nil {
		o.Leaks = s.cfg.Leaks
		for _, n := range s.c.Nodes() {
			o.Nodes = append(o.Nodes, n.Name)
		}
		o.Goroutines, o.Pairs = s.res.HasWith(SeriesGoroutines, "component", "agent"), s.res.Has(SeriesPairs)
		o.ProxyGoroutines = s.res.HasWith(SeriesGoroutines, "component", "proxy")
	}
	o.ProbesPlanned = planned
	res.Manifest, err = WriteManifest(s.dir, Manifest(o, spans))
	return res, err
}

// recordNotRun writes the steps-not-run counter: zero on every tick, and
// at the end the steps that did not run whole.
func (s *soak) recordNotRun(end time.Time, spans []Span) error {
	whole := 0
	for _, sp := range spans {
		if !strings.Contains(sp.Detail, cutShort) {
			whole++
		}
	}
	for _, t := range s.sampler.Ticks() {
		if t.After(end) {
			break
		}
		v := 0
		if t.Equal(end) {
			v = len(s.steps) - whole
		}
		if err := s.rec.Add(SeriesStepsNotRun, nil, t, float64(v)); err != nil {
			return err
		}
	}
	return nil
}

// recordProbesShort writes, when the run has a planned probe rate, the
// probes-short counter: zero on every tick and, at the end, how many fewer
// liveness probes started in the soak than the plan starts in its span.
// It returns the planned count (0 without a plan).
func (s *soak) recordProbesShort(end time.Time) (int64, error) {
	if s.cfg.ProbeRate <= 0 {
		return 0, nil
	}
	planned := ProbePlan{Pods: len(s.cfg.Roles.Probers), Every: s.cfg.ProbeInterval}.In(end.Sub(s.clk.start))
	total, _ := s.prober.Before([]time.Time{s.clk.start, end})
	short := max(0, planned-(total[1]-total[0]))
	for _, t := range s.sampler.Ticks() {
		if t.After(end) {
			break
		}
		v := int64(0)
		if t.Equal(end) {
			v = short
		}
		if err := s.rec.Add(SeriesProbesShort, nil, t, float64(v)); err != nil {
			return 0, err
		}
	}
	return planned, nil
}

func (s *soak) description() string {
	plan := ProbePlan{Pods: len(s.cfg.Roles.Probers), Every: s.cfg.ProbeInterval}
	d := fmt.Sprintf("Local soak on the embedded netns cluster (%s, %d nodes): %.0f rps open-loop from %d source pods, ABBA windows switching the agents between --mesh-transport h2 and auto, liveness probes at %s, chaos seed %d (%v; network faults %v, direct probes every %s)",
		filepath.Base(s.cfg.Scenario), len(s.c.Nodes()), s.rate, len(s.cfg.Roles.Sources), plan, s.cfg.Seed, ChaosKinds(), s.cfg.network(), s.cfg.DirectInterval)
	if l := s.cfg.Leaks; l != nil {
		d += fmt.Sprintf("; every agent's and proxy's resources sampled every %s for the leak gates", l.Every)
	}
	if len(s.cfg.AgentFlags) > 0 {
		d += fmt.Sprintf("; agents run with %v", s.cfg.AgentFlags)
	}
	if !s.rec.Has(SeriesPrunedLive) {
		d += "; prunes of in-use twins not measured: the agents export no " + metricPrunedLive
	}
	return d + "."
}

// clipSpans keeps what lies inside the soak: a span cut by the end is
// clipped to it, one that starts at or after it is dropped.
func clipSpans(spans []Span, end time.Time) []Span {
	var out []Span
	for _, sp := range spans {
		if !sp.Start.Before(end) {
			continue
		}
		if sp.End.IsZero() || sp.End.After(end) {
			if sp.Kind == Measure {
				continue // a window cut short measured less than its length
			}
			sp.End = end
		}
		out = append(out, sp)
	}
	return out
}

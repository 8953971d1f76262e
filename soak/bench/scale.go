package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The scale curves: every HTTP row again, at more connections and at more
// and less load than the method's one point, so the report shows where
// each path saturates on the machine and how its cost per request moves
// with load. Two sweeps:
//
//   - rate: paced at each of Rates over RateConns connections;
//   - conns: closed loop (as fast as answers come) over each of Conns.
//
// Each point is one h2load run of Seconds, measured like a visit (the
// proxies' CPU from /proc over exactly the run, the mesh rows' witness
// counter). The points go in the outer loop and the rows in the inner, so
// rows measured at the same point sit next to each other in time; the
// HTTP/3 row comes last, once the agents run the twins.

// Sweep names a scale curve.
type Sweep string

const (
	SweepRate  Sweep = "rate"
	SweepConns Sweep = "conns"
)

// ScalePlan is which points the sweeps visit.
type ScalePlan struct {
	// Rates are the paced rates (rps over all connections) of the rate
	// sweep, run over RateConns connections.
	Rates     []int `json:"rates"`
	RateConns int   `json:"rate_conns"`
	// Conns are the connection counts of the closed-loop sweep.
	Conns []int `json:"conns"`
	// Seconds is each point's length.
	Seconds float64 `json:"seconds"`
}

// DefaultScalePlan is 252 to 4,000 rps over 4 connections and 1, 4, 16
// and 64 connections closed loop, 5 s a point: 9 points per HTTP row,
// about four and a half minutes for the five rows on two cores. The
// lowest rate is 252, not 250: h2load paces each connection at a whole
// number of requests per second.
func DefaultScalePlan() ScalePlan {
	return ScalePlan{Rates: []int{252, 500, 1000, 2000, 4000}, RateConns: 4, Conns: []int{1, 4, 16, 64}, Seconds: 5}
}

// Validate names the first point h2load cannot run: it paces each
// connection on its own, so a rate must be a multiple of the connections.
func (p ScalePlan) Validate() error {
	if len(p.Rates) == 0 && len(p.Conns) == 0 {
		return fmt.Errorf("scale plan: no rates and no connection counts")
	}
	if p.Seconds < 1 || p.Seconds != float64(int(p.Seconds)) {
		return fmt.Errorf("scale plan: %gs a point, want a whole number of seconds, at least 1 (h2load -D)", p.Seconds)
	}
	if len(p.Rates) > 0 && p.RateConns < 1 {
		return fmt.Errorf("scale plan: rate sweep over %d connections, want at least 1", p.RateConns)
	}
	for i, r := range p.Rates {
		if r < 1 || r%p.RateConns != 0 {
			return fmt.Errorf("scale plan: rate %d (point %d of the rate sweep) is not a positive multiple of its %d connections (h2load paces each connection)", r, i+1, p.RateConns)
		}
		if i > 0 && r <= p.Rates[i-1] {
			return fmt.Errorf("scale plan: rates %v do not rise at point %d", p.Rates, i+1)
		}
	}
	for i, c := range p.Conns {
		if c < 1 {
			return fmt.Errorf("scale plan: %d connections (point %d of the conns sweep), want at least 1", c, i+1)
		}
		if i > 0 && c <= p.Conns[i-1] {
			return fmt.Errorf("scale plan: connection counts %v do not rise at point %d", p.Conns, i+1)
		}
	}
	return nil
}

// Scale is the sweeps' figures.
type Scale struct {
	Plan   ScalePlan    `json:"plan"`
	Points []ScalePoint `json:"points"`
	// Saturation is each row's summary: where it stopped keeping up.
	Saturation []Saturation `json:"saturation"`
}

// ScalePoint is one row at one point of a sweep.
type ScalePoint struct {
	Row   string `json:"row"`
	Sweep Sweep  `json:"sweep"`
	Conns int    `json:"conns"`
	// Run is the point's figures; its TargetRPS is zero in the closed
	// loop, its Added the latency over the direct row's at the same point.
	Run HTTPRun `json:"run"`
	// Proxies is each proxy's CPU at the point, per 1,000 achieved rps.
	Proxies []ProxyCost `json:"proxies,omitempty"`
}

// PerThousand is the proxies' vCPU per 1,000 rps together (0 for direct).
func (p ScalePoint) PerThousand() float64 {
	var s float64
	for _, c := range p.Proxies {
		s += c.PerThousand
	}
	return s
}

// heldShare is how close to its target a paced point must come, with no
// request failed, to count as held.
const heldShare = 0.98

// Saturation is where a row stopped keeping up.
type Saturation struct {
	Row string `json:"row"`
	// HeldRPS is the highest paced rate the row held (achieved at least
	// 98 % of the target, nothing failed) with every lower rate held too;
	// 0 when it held none. FirstMissed is the rate after it (0: none
	// missed).
	HeldRPS     int `json:"held_rps"`
	FirstMissed int `json:"first_missed_rps,omitempty"`
	// MaxRPS is the highest closed-loop rate, at MaxConns connections.
	MaxRPS   float64 `json:"max_rps"`
	MaxConns int     `json:"max_conns"`
}

// Saturate summarizes the points row by row, in the order rows are named.
func Saturate(rows []string, points []ScalePoint) []Saturation {
	var out []Saturation
	for _, row := range rows {
		s := Saturation{Row: row}
		var rate []ScalePoint
		for _, p := range points {
			if p.Row != row {
				continue
			}
			switch p.Sweep {
			case SweepRate:
				rate = append(rate, p)
			case SweepConns:
				if p.Run.AchievedRPS > s.MaxRPS {
					s.MaxRPS, s.MaxConns = p.Run.AchievedRPS, p.Conns
				}
			}
		}
		slices.SortFunc(rate, func(a, b ScalePoint) int { return int(a.Run.TargetRPS - b.Run.TargetRPS) })
		for _, p := range rate {
			if p.Run.Failed > 0 || p.Run.AchievedRPS < heldShare*p.Run.TargetRPS {
				s.FirstMissed = int(p.Run.TargetRPS)
				break
			}
			s.HeldRPS = int(p.Run.TargetRPS)
		}
		out = append(out, s)
	}
	return out
}

// relateScale fills each point's latency over the direct row's at the
// same point.
func relateScale(points []ScalePoint) {
	type key struct {
		sweep  Sweep
		conns  int
		target float64
	}
	direct := map[key]Latency{}
	for _, p := range points {
		if p.Row == "direct" {
			direct[key{p.Sweep, p.Conns, p.Run.TargetRPS}] = p.Run.Latency
		}
	}
	for i := range points {
		p := &points[i]
		if d, ok := direct[key{p.Sweep, p.Conns, p.Run.TargetRPS}]; ok && p.Row != "direct" {
			a := AddedOver(p.Run.Latency, d)
			p.Run.Added = &a
		}
	}
}

// scalePoint is one point to visit.
type scalePoint struct {
	sweep      Sweep
	conns, rps int
}

func (p ScalePlan) points() []scalePoint {
	var out []scalePoint
	for _, r := range p.Rates {
		out = append(out, scalePoint{SweepRate, p.RateConns, r})
	}
	for _, c := range p.Conns {
		out = append(out, scalePoint{SweepConns, c, 0})
	}
	return out
}

// scale runs the sweeps over every HTTP row: first the rows the agents'
// current transport serves, point by point, then, with the agents on the
// twins, the HTTP/3 row.
func (r *runner) scale(ctx context.Context, plan ScalePlan) (*Scale, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	var phases [2][]rowSpec
	var names []string
	for _, s := range rowSpecs {
		if s.kind != KindHTTP {
			continue
		}
		names = append(names, s.name)
		if s.transport == "auto" {
			phases[1] = append(phases[1], s)
		} else {
			phases[0] = append(phases[0], s)
		}
	}
	pts := plan.points()
	total := len(pts) * len(names)
	sc := &Scale{Plan: plan}
	for _, rows := range phases {
		for _, s := range rows {
			if err := r.ensure(ctx, s.transport); err != nil {
				return nil, err
			}
			if err := r.warm(ctx, s); err != nil {
				return nil, err
			}
		}
		for _, pt := range pts {
			for _, s := range rows {
				r.cfg.Logf("scale [%d/%d] %s: %s", len(sc.Points)+1, total, s.name, pt)
				p, err := r.scaleVisit(ctx, s, pt, time.Duration(plan.Seconds)*time.Second)
				if err != nil {
					return nil, fmt.Errorf("scale curve %s, row %s: %w", pt, s.name, err)
				}
				sc.Points = append(sc.Points, p)
			}
		}
	}
	relateScale(sc.Points)
	sc.Saturation = Saturate(names, sc.Points)
	return sc, nil
}

func (p scalePoint) String() string {
	if p.sweep == SweepRate {
		return fmt.Sprintf("%d rps paced over %d conns", p.rps, p.conns)
	}
	return fmt.Sprintf("closed loop over %d conns", p.conns)
}

// scaleVisit measures one row at one point, as a visit measures it.
func (r *runner) scaleVisit(ctx context.Context, s rowSpec, pt scalePoint, d time.Duration) (ScalePoint, error) {
	if err := r.ensure(ctx, s.transport); err != nil {
		return ScalePoint{}, err
	}
	url, auth, err := r.target(s)
	if err != nil {
		return ScalePoint{}, err
	}
	a := &acc{spec: s, cpu: map[string]*CPUSample{}, closedCPU: map[string]*CPUSample{},
		rss: map[string]int64{}, procs: map[string]int{}, proxies: r.proxiesOf(s)}
	log := filepath.Join(r.dir, fmt.Sprintf("h2load-scale-%s-%s-%d-%d.log", s.name, pt.sweep, pt.conns, pt.rps))
	l := HTTPLoad{URL: url, Authority: auth, Conns: pt.conns, RPS: pt.rps, Duration: d, Payload: r.payload, LogFile: log}
	err = r.witnessed(ctx, a, func() error {
		return r.measured(a, a.cpu, func() error {
			sum, lat, err := r.h2load(ctx, l)
			if err != nil {
				return err
			}
			a.paced.requests += sum.Succeeded
			a.paced.bad += sum.Total - sum.Status2
			a.paced.seconds += sum.Seconds
			a.paced.lat = append(a.paced.lat, lat...)
			return nil
		})
	}, func() float64 { return 0.99 * float64(a.paced.requests) })
	if err != nil {
		return ScalePoint{}, err
	}
	_ = os.Remove(log)
	row := a.row(float64(pt.rps))
	return ScalePoint{Row: s.name, Sweep: pt.sweep, Conns: pt.conns, Run: *row.Paced, Proxies: row.Proxies}, nil
}

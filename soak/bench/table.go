package bench

import (
	"fmt"
	"strings"
)

// Table is the report as a text table, one line per row, the way the
// command prints it.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "aether bench %s: %d CPUs, load average %.2f %.2f %.2f before, %.2f %.2f %.2f after; %s, %d B, %d rps over %d conns (%gs paced, %gs closed loop per visit), ABBA\n",
		r.Run, r.CPUs, r.LoadBefore[0], r.LoadBefore[1], r.LoadBefore[2], r.LoadAfter[0], r.LoadAfter[1], r.LoadAfter[2],
		r.Method.Generator, r.Method.PayloadBytes, r.Method.RPS, r.Method.Conns, r.Method.PacedSeconds, r.Method.ClosedSeconds)
	fmt.Fprintf(&b, "%-11s %9s %8s %8s %8s %9s %9s %9s %8s %-25s %-25s %-15s\n",
		"row", "rps", "p50 µs", "p90 µs", "p99 µs", "+p50 µs", "+p90 µs", "+p99 µs", "closed", "vCPU/1000rps a | b", "closed vCPU/1000 a | b", "RSS MiB a | b")
	for _, row := range r.Rows {
		if p := row.Paced; p != nil {
			add := [3]string{"—", "—", "—"}
			if a := p.Added; a != nil {
				add = [3]string{fmt.Sprintf("%+.0f", a.P50), fmt.Sprintf("%+.0f", a.P90), fmt.Sprintf("%+.0f", a.P99)}
			}
			fmt.Fprintf(&b, "%-11s %9.1f %8.0f %8.0f %8.0f %9s %9s %9s %8.0f %-25s %-25s %-15s\n", row.Name, p.AchievedRPS,
				p.Latency.P50, p.Latency.P90, p.Latency.P99, add[0], add[1], add[2], row.Closed.AchievedRPS,
				pair(row.Proxies, func(c ProxyCost) float64 { return c.PerThousand }, "%.3f"),
				pair(row.Proxies, func(c ProxyCost) float64 { return c.ClosedPerThousand }, "%.3f"),
				pair(row.Proxies, func(c ProxyCost) float64 { return c.RSSMiB }, "%.1f"))
		}
	}
	fmt.Fprintf(&b, "%-11s %10s %8s %9s %-20s %-15s\n", "stream", "Mbit/s", "loss %", "of direct", "vCPU a | b", "RSS MiB a | b")
	for _, row := range r.Rows {
		if s := row.Stream; s != nil {
			of := "—"
			if s.OfDirect > 0 {
				of = fmt.Sprintf("%.2f", s.OfDirect)
			}
			fmt.Fprintf(&b, "%-11s %10.0f %8.2f %9s %-20s %-15s\n", row.Name, s.Mbps, s.LossPercent, of,
				pair(row.Proxies, func(c ProxyCost) float64 { return c.VCPU }, "%.2f"),
				pair(row.Proxies, func(c ProxyCost) float64 { return c.RSSMiB }, "%.1f"))
		}
	}
	if r.Scale != nil {
		r.Scale.table(&b)
	}
	return b.String()
}

func pair(ps []ProxyCost, f func(ProxyCost) float64, format string) string {
	if len(ps) == 0 {
		return "—"
	}
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf(format, f(p)))
	}
	return strings.Join(s, " | ")
}

// scaleTable is the scale curves as two text tables, one line per row: a
// cell per point (achieved rps, p99 — over direct's at the same point for
// the proxied rows — and both proxies' vCPU per 1,000 rps), then where the
// row saturated.
func (s *Scale) table(b *strings.Builder) {
	cell := func(p *ScalePoint) string {
		if p == nil {
			return "—"
		}
		lat := fmt.Sprintf("p99 %.0f", p.Run.Latency.P99)
		if a := p.Run.Added; a != nil {
			lat = fmt.Sprintf("%+.0f", a.P99)
		}
		c := fmt.Sprintf("%.0f %s", p.Run.AchievedRPS, lat)
		if k := p.PerThousand(); k > 0 {
			c += fmt.Sprintf(" %.3f", k)
		}
		return c
	}
	find := func(row string, sw Sweep, conns int, rps float64) *ScalePoint {
		for i := range s.Points {
			p := &s.Points[i]
			if p.Row == row && p.Sweep == sw && p.Conns == conns && p.Run.TargetRPS == rps {
				return p
			}
		}
		return nil
	}
	if len(s.Plan.Rates) > 0 {
		fmt.Fprintf(b, "scale, paced over %d conns, %gs a point (cell: achieved rps, +p99 µs over direct, both proxies' vCPU/1000rps)\n", s.Plan.RateConns, s.Plan.Seconds)
		fmt.Fprintf(b, "%-11s", "row")
		for _, r := range s.Plan.Rates {
			fmt.Fprintf(b, " %-19s", fmt.Sprintf("%d rps", r))
		}
		fmt.Fprintf(b, " %s\n", "held")
		for _, sat := range s.Saturation {
			fmt.Fprintf(b, "%-11s", sat.Row)
			for _, r := range s.Plan.Rates {
				fmt.Fprintf(b, " %-19s", cell(find(sat.Row, SweepRate, s.Plan.RateConns, float64(r))))
			}
			fmt.Fprintf(b, " %d\n", sat.HeldRPS)
		}
	}
	if len(s.Plan.Conns) > 0 {
		fmt.Fprintf(b, "scale, closed loop, %gs a point (cell: achieved rps, p99 µs or + over direct, both proxies' vCPU/1000rps)\n", s.Plan.Seconds)
		fmt.Fprintf(b, "%-11s", "row")
		for _, c := range s.Plan.Conns {
			fmt.Fprintf(b, " %-19s", fmt.Sprintf("%d conns", c))
		}
		fmt.Fprintf(b, " %s\n", "max rps")
		for _, sat := range s.Saturation {
			fmt.Fprintf(b, "%-11s", sat.Row)
			for _, c := range s.Plan.Conns {
				fmt.Fprintf(b, " %-19s", cell(find(sat.Row, SweepConns, c, 0)))
			}
			fmt.Fprintf(b, " %.0f at %d\n", sat.MaxRPS, sat.MaxConns)
		}
	}
}

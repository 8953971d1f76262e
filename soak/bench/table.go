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

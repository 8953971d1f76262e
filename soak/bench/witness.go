package bench

import (
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Selector picks a proxy counter's samples: the metric, labels that must
// equal, and labels that must start with a prefix.
type Selector struct {
	Metric string
	Equal  map[string]string
	Prefix map[string]string
}

func (s Selector) String() string {
	var parts []string
	for k, v := range s.Equal {
		parts = append(parts, fmt.Sprintf("%s=%q", k, v))
	}
	for k, v := range s.Prefix {
		parts = append(parts, fmt.Sprintf("%s=~%q", k, v+".*"))
	}
	return s.Metric + "{" + strings.Join(parts, ",") + "}"
}

// SumCounter sums the samples of body (Prometheus text format) s selects.
func SumCounter(body string, s Selector) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("proxy metrics: %w", err)
	}
	fam := fams[s.Metric]
	if fam == nil {
		return 0, nil
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if selects(m, s) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sum, nil
}

func selects(m *dto.Metric, s Selector) bool {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for k, v := range s.Equal {
		if labels[k] != v {
			return false
		}
	}
	for k, v := range s.Prefix {
		if l, ok := labels[k]; !ok || !strings.HasPrefix(l, v) {
			return false
		}
	}
	return true
}

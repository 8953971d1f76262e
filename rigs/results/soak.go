package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
)

// Gate is one decided soak gate, as a person and the release gate read
// it. Inputs carries the figures the verdict follows from, so the verdict
// can be recomputed without trusting Verdict.
type Gate struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	// Figure is the measured quantity with its unit and limit.
	Figure string     `json:"figure"`
	Reason string     `json:"reason"`
	Inputs GateInputs `json:"inputs"`
}

// GateInputs holds exactly one kind of evidence.
type GateInputs struct {
	Ratio    *RatioInputs    `json:"ratio,omitempty"`
	Count    *CountInputs    `json:"count,omitempty"`
	Liveness *LivenessInputs `json:"liveness,omitempty"`
}

// RatioInputs is a ratio's interval against its threshold.
type RatioInputs struct {
	Estimate float64 `json:"estimate"`
	// Lower and Upper are the interval; absent when there is none.
	Lower *float64 `json:"lower,omitempty"`
	Upper *float64 `json:"upper,omitempty"`
	// Bounded is false when too few pairs gave an interval at the asked
	// confidence; the bounds then decide nothing.
	Bounded bool    `json:"bounded"`
	Max     float64 `json:"max"`
	// Refused, when set, is why the windows could not be paired at all.
	Refused string `json:"refused,omitempty"`
}

// CountInputs is a counted value against its limit.
type CountInputs struct {
	Count int64 `json:"count"`
	Limit int64 `json:"limit"`
}

// LivenessInputs is failed probes out of total against an SLO in percent
// ("99.999").
type LivenessInputs struct {
	Failed int64  `json:"failed"`
	Total  int64  `json:"total"`
	SLO    string `json:"slo"`
}

var errNoInputs = errors.New("the gate carries no inputs, so nothing shows it passed")

// Decide recomputes a gate's verdict from its inputs alone.
func (in GateInputs) Decide() (Verdict, error) {
	n := 0
	for _, set := range []bool{in.Ratio != nil, in.Count != nil, in.Liveness != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return Fail, errNoInputs
	case n > 1:
		return Fail, errors.New("the gate carries more than one kind of input")
	case in.Ratio != nil:
		return in.Ratio.decide(), nil
	case in.Count != nil:
		if in.Count.Count <= in.Count.Limit {
			return Pass, nil
		}
		return Fail, nil
	}
	return in.Liveness.decide()
}

func (r *RatioInputs) decide() Verdict {
	switch {
	case r.Refused != "":
		return Refused
	case !r.Bounded:
		return Inconclusive
	case r.Lower == nil || r.Upper == nil || *r.Lower > *r.Upper:
		// An interval claimed but not given (or inverted) shows nothing.
		return Fail
	case *r.Upper <= r.Max:
		return Pass
	case *r.Lower > r.Max:
		return Fail
	}
	return Inconclusive
}

// decide passes when (total − failed) / total ≥ SLO, in exact arithmetic:
// the budget at 99.999% over 719,984 probes is 7, and 8 must fail.
func (l *LivenessInputs) decide() (Verdict, error) {
	slo, ok := new(big.Rat).SetString(l.SLO)
	if !ok || slo.Sign() <= 0 || slo.Cmp(big.NewRat(100, 1)) > 0 {
		return Fail, fmt.Errorf("SLO %q is not a percentage in (0, 100]", l.SLO)
	}
	if l.Failed < 0 || l.Failed > l.Total {
		return Fail, fmt.Errorf("%d failed of %d probes is not a count", l.Failed, l.Total)
	}
	if l.Total == 0 {
		return Inconclusive, nil
	}
	good := new(big.Rat).SetFrac64(l.Total-l.Failed, l.Total)
	if good.Mul(good, big.NewRat(100, 1)).Cmp(slo) >= 0 {
		return Pass, nil
	}
	return Fail, nil
}

// DecideSoak derives a soak's verdict from its gates' verdicts: any FAIL
// fails it; otherwise a refused or inconclusive gate keeps it from passing.
func DecideSoak(gates []Gate) (Verdict, string) {
	if len(gates) == 0 {
		return Inconclusive, "no gate was graded"
	}
	by := map[Verdict][]string{}
	for _, g := range gates {
		by[g.Verdict] = append(by[g.Verdict], g.Name)
	}
	for _, v := range []Verdict{Fail, Refused, Inconclusive} {
		if len(by[v]) > 0 {
			return v, fmt.Sprintf("%s: %s", strings.ToLower(string(v)), strings.Join(by[v], ", "))
		}
	}
	return Pass, fmt.Sprintf("all %d gate(s) passed", len(gates))
}

// SoakGrade is the part of a soak's grade.json the release gate judges.
type SoakGrade struct {
	Soak string `json:"soak"`
	// Builds are the builds the soak ran, as its manifest names them.
	Builds  []string `json:"builds"`
	Verdict Verdict  `json:"verdict"`
	Reason  string   `json:"reason"`
	Gates   []Gate   `json:"gates"`
	// Build is the build that graded the soak.
	Build Build `json:"build"`
}

// LoadSoak reads the judged part of a grade.json.
func LoadSoak(path string) (SoakGrade, error) {
	var g SoakGrade
	b, err := os.ReadFile(path)
	if err != nil {
		return g, fmt.Errorf("failed to read soak grade: %w", err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("soak grade %s: %w", path, err)
	}
	if g.Soak == "" {
		return g, fmt.Errorf("soak grade %s: field \"soak\" is empty", path)
	}
	return g, nil
}

// CheckSoak recomputes every gate's verdict from its inputs, and the soak's
// from those, and returns every disagreement with what the file declares,
// each naming the file and the gate.
func CheckSoak(path string, g SoakGrade) []string {
	var out []string
	recomputed := make([]Gate, len(g.Gates))
	for i, gt := range g.Gates {
		v, err := gt.Inputs.Decide()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: gate %q: %v", path, gt.Name, err))
		} else if v != gt.Verdict {
			out = append(out, fmt.Sprintf("%s: gate %q declares %s but its inputs decide %s", path, gt.Name, gt.Verdict, v))
		}
		recomputed[i] = gt
		recomputed[i].Verdict = v
	}
	if v, why := DecideSoak(recomputed); v != g.Verdict {
		out = append(out, fmt.Sprintf("%s: declares %s but its gates decide %s (%s)", path, g.Verdict, v, why))
	}
	return out
}

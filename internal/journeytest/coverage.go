package journeytest

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Coverage kinds: what a journey declares that tests can reach.
const (
	// CoverTransition is a declared transition to one destination: an outcome
	// transition's to (or Close), each allowed destination of its decision, a
	// pathway's next, a detour's return, a global transition.
	CoverTransition = "transition"
	// CoverBand is a confidence band of a decision: autoAdvance (applied),
	// retryWithFeedback (when the decision sets it), requireApproval (when the
	// thresholds leave room for it) and escalate.
	CoverBand = "decision band"
	// CoverOutcome is a pathway's outcome transition (onSuccess, onFailure,
	// onPartialSuccess, onUnclear): a turn of that pathway ended with that result.
	CoverOutcome = "outcome"
)

// CoverageItem is one thing a journey declares, and whether a test reached it.
type CoverageItem struct {
	Kind, Name string
	Covered    bool
	// match reports whether the tests' transitions and decisions reach the item.
	match func(h []flowv1.HistoryEntry, d []flowv1.DecisionRecord) bool
}

// JourneyCoverage is the coverage of one journey by the tests that run it.
type JourneyCoverage struct {
	Journey string
	// Revisions are the revisions the tests compiled to (tests of one journey may run
	// different versions of it: what any of them declares counts).
	Revisions []string
	Tests     int
	Items     []CoverageItem
}

// Count returns the covered and total items of kind ("" for all kinds).
func (c *JourneyCoverage) Count(kind string) (covered, total int) {
	for _, it := range c.Items {
		if kind == "" || it.Kind == kind {
			total++
			if it.Covered {
				covered++
			}
		}
	}
	return covered, total
}

// Percent is the share of items covered, in percent (100 with nothing to cover).
func (c *JourneyCoverage) Percent() float64 {
	covered, total := c.Count("")
	return percent(covered, total)
}

func percent(covered, total int) float64 {
	if total == 0 {
		return 100
	}
	return 100 * float64(covered) / float64(total)
}

// Coverage computes, per journey, which of its transitions, decision bands and
// outcomes the tests reached. Tests that could not run count for nothing.
func Coverage(results []*Result) []*JourneyCoverage {
	var out []*JourneyCoverage
	byJourney := map[string]*JourneyCoverage{}
	history := map[string][]flowv1.HistoryEntry{}
	decisions := map[string][]flowv1.DecisionRecord{}
	for _, r := range results {
		if r.Err != nil || r.Data == nil {
			continue
		}
		jc := byJourney[r.Journey]
		if jc == nil {
			jc = &JourneyCoverage{Journey: r.Journey}
			byJourney[r.Journey] = jc
			out = append(out, jc)
		}
		jc.Tests++
		if !slices.Contains(jc.Revisions, r.Revision) {
			jc.Revisions = append(jc.Revisions, r.Revision)
			for _, it := range coverageItems(r.Data) {
				if !slices.ContainsFunc(jc.Items, func(o CoverageItem) bool { return o.Kind == it.Kind && o.Name == it.Name }) {
					jc.Items = append(jc.Items, it)
				}
			}
		}
		for i := range r.Steps {
			history[r.Journey] = append(history[r.Journey], r.Steps[i].History...)
			decisions[r.Journey] = append(decisions[r.Journey], r.Steps[i].Decisions...)
		}
	}
	for _, jc := range out {
		for i := range jc.Items {
			jc.Items[i].Covered = jc.Items[i].match(history[jc.Journey], decisions[jc.Journey])
		}
	}
	return out
}

// coverageItems lists what a revision declares, pathway by pathway in the journey's
// order, then the global transitions.
func coverageItems(data *RevisionData) []CoverageItem {
	var items []CoverageItem
	took := func(from, name, to string, close bool) func([]flowv1.HistoryEntry, []flowv1.DecisionRecord) bool {
		return func(hs []flowv1.HistoryEntry, _ []flowv1.DecisionRecord) bool {
			for _, h := range hs {
				if h.Transition != name || (from != "*" && h.From != from) {
					continue
				}
				if close && h.Action == flowv1.ActionClose || !close && (to == "" || h.To == to) {
					return true
				}
			}
			return false
		}
	}
	for _, e := range data.Journey.Pathways {
		p := string(e.Name)
		spec := data.Pathways[p]
		if spec == nil {
			continue
		}
		for name, t := range spec.Transitions.All() {
			reached := func(hs []flowv1.HistoryEntry, ds []flowv1.DecisionRecord) bool {
				if took(p, name, "", false)(hs, nil) {
					return true
				}
				return slices.ContainsFunc(ds, func(d flowv1.DecisionRecord) bool { return d.From == p && d.Transition == name })
			}
			items = append(items, CoverageItem{Kind: CoverOutcome, Name: p + "." + name, match: reached})
			switch {
			case t.Decision != nil:
				for _, dest := range t.Decision.AllowedDestinations {
					items = append(items, CoverageItem{Kind: CoverTransition, Name: fmt.Sprintf("%s %s→%s", name, p, dest), match: took(p, name, string(dest), false)})
				}
				for _, b := range bands(t.Decision) {
					state := b.state
					items = append(items, CoverageItem{Kind: CoverBand, Name: fmt.Sprintf("%s.%s %s", p, name, b.name),
						match: func(_ []flowv1.HistoryEntry, ds []flowv1.DecisionRecord) bool {
							return slices.ContainsFunc(ds, func(d flowv1.DecisionRecord) bool {
								return d.From == p && d.Transition == name && d.State == state
							})
						}})
				}
			case t.Action == flowv1.ActionClose:
				items = append(items, CoverageItem{Kind: CoverTransition, Name: fmt.Sprintf("%s %s→(Close)", name, p), match: took(p, name, "", true)})
			default:
				items = append(items, CoverageItem{Kind: CoverTransition, Name: fmt.Sprintf("%s %s→%s", name, p, t.To), match: took(p, name, string(t.To), false)})
			}
		}
		if spec.Next != "" {
			items = append(items, CoverageItem{Kind: CoverTransition, Name: fmt.Sprintf("next %s→%s", p, spec.Next), match: took(p, "next", string(spec.Next), false)})
		}
		if rb := spec.ReturnBehavior; rb != nil && rb.Type == flowv1.ReturnToPrevious {
			items = append(items, CoverageItem{Kind: CoverTransition, Name: fmt.Sprintf("return %s→(previous)", p), match: took(p, "return", "", false)})
		}
	}
	for _, g := range data.Journey.Transitions {
		from := g.From
		if from == "" {
			from = "*"
		}
		items = append(items, CoverageItem{Kind: CoverTransition, Name: fmt.Sprintf("%s %s→%s", g.Name, from, g.To), match: took(from, string(g.Name), g.To, false)})
	}
	return items
}

type band struct {
	name  string
	state flowv1.DecisionState
}

// bands are the confidence bands a decision's thresholds leave.
func bands(d *flowv1.Decision) []band {
	auto, approval := "0.8", "0.6"
	feedback := ""
	if th := d.ConfidenceThresholds; th != nil {
		auto = orValue(string(th.AutoAdvance), auto)
		approval = orValue(string(th.RequireApproval), approval)
		feedback = string(th.RetryWithFeedback)
	}
	out := []band{{"autoAdvance (>= " + auto + ")", flowv1.DecisionApplied}}
	if feedback != "" {
		out = append(out, band{"retryWithFeedback (>= " + feedback + ")", flowv1.DecisionRetriedWithFeedback})
	}
	a, _ := strconv.ParseFloat(auto, 64)
	r, _ := strconv.ParseFloat(approval, 64)
	below := auto // a lone autoAdvance below the default requireApproval leaves no approval band
	if r < a {
		out = append(out, band{"requireApproval (>= " + approval + ")", flowv1.DecisionPending})
		below = approval
	}
	return append(out, band{"escalate (below " + below + ")", flowv1.DecisionEscalated})
}

// PrintCoverage writes, per journey, the share of transitions, decision bands and
// outcomes the tests reached, then what they did not reach.
func PrintCoverage(w io.Writer, cov []*JourneyCoverage) {
	for _, c := range cov {
		fmt.Fprintf(w, "Coverage of journey %s (%d tests", c.Journey, c.Tests)
		if len(c.Revisions) == 1 {
			fmt.Fprintf(w, ", revision %s", c.Revisions[0])
		}
		fmt.Fprintln(w, "):")
		for _, k := range []string{CoverTransition, CoverBand, CoverOutcome} {
			covered, total := c.Count(k)
			fmt.Fprintf(w, "  %-16s %3d/%-3d %5.1f%%\n", k+"s", covered, total, percent(covered, total))
		}
		covered, total := c.Count("")
		fmt.Fprintf(w, "  %-16s %3d/%-3d %5.1f%%\n", "total", covered, total, c.Percent())
		for _, it := range c.Items {
			if !it.Covered {
				fmt.Fprintf(w, "  not covered: %s %s\n", it.Kind, it.Name)
			}
		}
		fmt.Fprintln(w)
	}
}

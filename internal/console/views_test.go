package console

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// TestTimelineNamesTheMessageOfATransition: a transition shows the text of the message
// that caused it, from spec.messages while the message is there, from the transcript
// once kubectl journey say has dropped it, and says so when neither keeps it.
func TestTimelineNamesTheMessageOfATransition(t *testing.T) {
	s := &flowv1alpha1.Session{
		Spec: flowv1alpha1.SessionSpec{
			MessagesDropped: 2,
			Messages:        []flowv1alpha1.Message{{ID: "m-3", Text: "Book the Tuesday slot."}},
		},
		Status: flowv1alpha1.SessionStatus{
			Transcript: []flowv1alpha1.Exchange{{MessageID: "m-2", User: "What is the copay?", Assistant: "USD 40."}},
			History: []flowv1alpha1.HistoryEntry{
				{Step: 1, From: "intake", To: "booking", MessageID: "m-1"},
				{Step: 2, From: "booking", To: "faq", MessageID: "m-2"},
				{Step: 3, From: "booking", To: "confirmation", MessageID: "m-3"},
			},
		},
	}
	want := map[int64]string{
		1: "m-1: " + droppedMessage,
		2: "m-2: What is the copay?",
		3: "m-3: Book the Tuesday slot.",
	}
	seen := 0
	for _, it := range timeline(s) {
		if it.Kind != "transition" {
			continue
		}
		for _, f := range it.Fields {
			if f.Name != "After message" {
				continue
			}
			seen++
			if f.Value != want[it.Step] {
				t.Errorf("step %d: After message %q, want %q", it.Step, f.Value, want[it.Step])
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d transitions name their message, want %d", seen, len(want))
	}
}

// renderPage renders page name with the layout, as the console serves it.
func renderPage(t *testing.T, name string, l layout) string {
	t.Helper()
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	if l.Nav == "" {
		l.Nav = name
	}
	var buf bytes.Buffer
	if err := p.byName[name].ExecuteTemplate(&buf, "layout", l); err != nil {
		t.Fatalf("rendering %s: %v", name, err)
	}
	return buf.String()
}

// TestBudgetsPage: the Budgets page, linked from the navigation, shows each Budget
// with a row per limit it sets (spent, reserved, remaining, the limit and the share
// spent), its window, which Sessions it selects, what happens when a call does not
// fit, and its conditions, Exhausted and SoftLimitReached called out; a Budget the
// manager has not counted yet says so.
func TestBudgetsPage(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(24 * time.Hour))
	counted := &flowv1alpha1.Budget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "care-daily", Generation: 2},
		Spec: flowv1alpha1.BudgetSpec{
			Selector: flowv1alpha1.BudgetSelector{Journeys: []string{"healthcare-referral"}, MatchLabels: map[string]string{"team": "care"}},
			Window:   "Day", TimeZone: "Europe/Berlin",
			Limits:      flowv1alpha1.BudgetLimits{CostUSD: "0.05", Tokens: 1000},
			OnExhausted: flowv1alpha1.ExhaustedStall,
		},
		Status: flowv1alpha1.BudgetStatus{
			ObservedGeneration: 2, WindowStart: &start, WindowEnd: &end,
			Spent:     flowv1alpha1.BudgetAmounts{CostUSD: "0.045", Tokens: ptr.To[int64](900)},
			Reserved:  flowv1alpha1.BudgetAmounts{CostUSD: "0.004", Tokens: ptr.To[int64](80)},
			Remaining: flowv1alpha1.BudgetAmounts{CostUSD: "0.001", Tokens: ptr.To[int64](20)},
			Sessions:  7, Holding: 1, Waiting: 3,
			Conditions: []metav1.Condition{
				{Type: flowv1alpha1.ConditionExhausted, Status: metav1.ConditionTrue, Reason: flowv1alpha1.ReasonBudgetExhausted,
					Message: "3 Sessions wait: a call could cost USD 0.002, USD 0.001 is left"},
				{Type: flowv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Counted"},
				{Type: flowv1alpha1.ConditionSoftLimitReached, Status: metav1.ConditionTrue, Reason: flowv1alpha1.ReasonSoftLimitReached,
					Message: "costUSD is at 90% of its limit"},
			},
		},
	}
	fresh := &flowv1alpha1.Budget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "default", Generation: 1},
		Spec: flowv1alpha1.BudgetSpec{Window: "1h", Limits: flowv1alpha1.BudgetLimits{ModelCalls: 100},
			OnExhausted: flowv1alpha1.ExhaustedDegrade, DegradeTo: &flowv1alpha1.DegradeTarget{Agent: "small"}},
	}

	c := budgetOf(counted)
	wantLimits := []budgetLimit{
		{Name: "Cost (USD)", Spent: "0.045", Reserved: "0.004", Remaining: "0.001", Limit: "0.05", Percent: 90},
		{Name: "Tokens", Spent: "900", Reserved: "80", Remaining: "20", Limit: "1000", Percent: 90},
	}
	if !slices.Equal(c.Limits, wantLimits) {
		t.Errorf("limits %+v, want %+v", c.Limits, wantLimits)
	}
	var types []string
	for _, cond := range c.Conditions {
		types = append(types, cond.Type)
	}
	if want := []string{"Ready", "SoftLimitReached", "Exhausted"}; !slices.Equal(types, want) {
		t.Errorf("conditions in order %v, want %v", types, want)
	}
	if want := []string{"SoftLimitReached: costUSD is at 90% of its limit",
		"Exhausted: 3 Sessions wait: a call could cost USD 0.002, USD 0.001 is left"}; !slices.Equal(c.Alerts, want) {
		t.Errorf("alerts %q, want %q", c.Alerts, want)
	}
	if c.Window != "Day in Europe/Berlin" || c.Span != "since 2026-11-26 00:00 UTC, until 2026-11-27 00:00 UTC" ||
		c.Selects != "Sessions of journeys healthcare-referral and labelled team=care" || !c.Counted || c.Stale {
		t.Errorf("card %+v", c)
	}
	f := budgetOf(fresh)
	if f.Counted || len(f.Limits) != 1 || f.Limits[0] != (budgetLimit{Name: "Model calls", Limit: "100"}) ||
		f.Selects != "every Session of the namespace" || !strings.Contains(f.OnExhausted, "agent small") || f.Window != "1h" {
		t.Errorf("uncounted Budget: card %+v", f)
	}

	html := renderPage(t, "budgets", layout{Title: "Budgets", Page: []budgetCard{c, f}})
	for _, want := range []string{
		`<a href="/budgets" aria-current="page">Budgets</a>`,
		`<h2>care-daily <span class="ns">in team-a</span></h2>`,
		`<th scope="row">Cost (USD)</th><td>0.045</td><td>0.004</td><td>0.001</td>`,
		`<td>0.05</td><td><meter aria-hidden="true" min="0" max="100" value="90"`,
		`<th scope="row">Tokens</th><td>900</td><td>80</td><td>20</td>`,
		`<tr data-condition="Exhausted"><th scope="row">Exhausted</th><td>True</td><td>BudgetExhausted</td><td>3 Sessions wait: a call could cost USD 0.002, USD 0.001 is left</td></tr>`,
		`<tr data-condition="SoftLimitReached"><th scope="row">SoftLimitReached</th><td>True</td>`,
		`<li>Exhausted: 3 Sessions wait`,
		`Day in Europe/Berlin, since 2026-11-26 00:00 UTC, until 2026-11-27 00:00 UTC`,
		`7 spent · 1 holding a reservation · 3 waiting for room`,
		`<h2>default <span class="ns">in team-b</span></h2>`,
		`Not counted yet`,
		`<th scope="row">Model calls</th><td>–</td><td>–</td><td>–</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("Budgets page lacks %s", want)
		}
	}
	if strings.Count(html, "Not counted yet") != 1 {
		t.Errorf("want only the uncounted Budget to say it is not counted yet")
	}
	for _, page := range []string{"journeys", "sessions", "approvals"} {
		if html := renderPage(t, page, layout{Title: page}); !strings.Contains(html, `<a href="/budgets">Budgets</a>`) {
			t.Errorf("the %s page does not link to the Budgets page", page)
		}
	}
	if html := renderPage(t, "budgets", layout{Title: "Budgets", Page: []budgetCard(nil)}); !strings.Contains(html, "No budgets in the namespaces you can see") {
		t.Errorf("an empty Budgets page does not say there are none")
	}
}

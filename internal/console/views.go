package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/toolview"
	"github.com/journeyops/journey-operator/internal/truncate"
)

// phases are the Session phases, in lifecycle order, for the phase filter.
var phases = []flowv1alpha1.Phase{
	flowv1alpha1.PhasePending, flowv1alpha1.PhaseRunning, flowv1alpha1.PhaseWaitingForInput,
	flowv1alpha1.PhaseAwaitingApproval, flowv1alpha1.PhaseEscalated,
	flowv1alpha1.PhaseCompleted, flowv1alpha1.PhaseFailed, flowv1alpha1.PhaseCancelled,
}

func terminal(p flowv1alpha1.Phase) bool {
	return p == flowv1alpha1.PhaseCompleted || p == flowv1alpha1.PhaseFailed || p == flowv1alpha1.PhaseCancelled
}

// filter selects Sessions on the Sessions page and its live stream.
type filter struct {
	Namespace, Journey, Phase string
}

func (f filter) match(s *flowv1alpha1.Session) bool {
	return (f.Namespace == "" || s.Namespace == f.Namespace) &&
		(f.Journey == "" || s.Spec.JourneyRef.Name == f.Journey) &&
		(f.Phase == "" || string(phaseOf(s)) == f.Phase)
}

// Query is the filter as a URL query string.
func (f filter) Query() string {
	var parts []string
	for _, kv := range [][2]string{{"namespace", f.Namespace}, {"journey", f.Journey}, {"phase", f.Phase}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, "&")
}

func phaseOf(s *flowv1alpha1.Session) flowv1alpha1.Phase {
	return cmp.Or(s.Status.Phase, flowv1alpha1.PhasePending)
}

// sessionRow is one line of the Sessions table.
type sessionRow struct {
	ID, Namespace, Name, Journey, Phase, Pathway, Age, LastReply string
	Turns                                                        int32
	Pending                                                      bool
}

func rowOf(s *flowv1alpha1.Session, now time.Time) sessionRow {
	r := sessionRow{
		ID: rowID(s.Namespace, s.Name), Namespace: s.Namespace, Name: s.Name, Journey: s.Spec.JourneyRef.Name,
		Phase: string(phaseOf(s)), Pathway: s.Status.CurrentPathway, Turns: s.Status.Turns,
		Age: age(s.CreationTimestamp, now), Pending: pendingDecision(s) != nil,
	}
	if lt := s.Status.LastTurn; lt != nil {
		r.LastReply = truncate.Line(lt.AssistantText, 120)
	}
	return r
}

func rowID(ns, name string) string { return "session-" + ns + "/" + name }

func sortSessions(list []*flowv1alpha1.Session) {
	slices.SortFunc(list, func(a, b *flowv1alpha1.Session) int {
		return cmp.Or(
			b.CreationTimestamp.Compare(a.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name),
		)
	})
}

func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	d := now.Sub(t.Time)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// pendingDecision is the decision a Session waits on, or nil. An answered decision
// is not pending, even before the controller catches up.
func pendingDecision(s *flowv1alpha1.Session) *flowv1alpha1.DecisionRecord {
	d := s.Status.PendingDecision()
	if d == nil || s.Spec.ApprovalIndex(d.ID) >= 0 {
		return nil
	}
	return d
}

// approvalItem is one decision on the Approvals page.
type approvalItem struct {
	Namespace, Name, Journey, Phase string
	Decision                        *flowv1alpha1.DecisionRecord
	Destinations                    []string
	LastReply                       string
	// Tool is the tool of a tool call waiting for approval, "" for a transition.
	Tool string
}

func approvalOf(s *flowv1alpha1.Session) approvalItem {
	d := pendingDecision(s)
	item := approvalItem{
		Namespace: s.Namespace, Name: s.Name, Journey: s.Spec.JourneyRef.Name, Phase: string(phaseOf(s)), Decision: d,
	}
	dests := []string{}
	if d.To != "" {
		dests = append(dests, d.To)
	}
	for _, a := range d.AllowedDestinations {
		if !slices.Contains(dests, a) {
			dests = append(dests, a)
		}
	}
	item.Destinations = dests
	if tool, ok := d.ToolCall(); ok {
		item.Tool = tool
	}
	if lt := s.Status.LastTurn; lt != nil {
		item.LastReply = lt.AssistantText
	}
	return item
}

// timelineItem is one entry of a Session's timeline, in step order.
type timelineItem struct {
	Step int64
	// Kind is "call" (an agent call from the journal), "tool" (a tool call) or
	// "transition" (history).
	Kind string
	Time string
	// Title is a one-line summary; Fields are labelled details.
	Title  string
	Fields []field
}

type field struct{ Name, Value string }

func timeline(s *flowv1alpha1.Session) []timelineItem {
	msgs := messageTexts(s)
	var items []timelineItem
	for _, e := range s.Status.Journal {
		if e.Kind != flowv1alpha1.EffectCallTool {
			items = append(items, callItem(e))
		}
	}
	for _, c := range toolview.Of(&s.Status) {
		items = append(items, toolItem(c))
	}
	for _, h := range s.Status.History {
		items = append(items, transitionItem(h, msgs))
	}
	slices.SortStableFunc(items, func(a, b timelineItem) int { return cmp.Compare(a.Step, b.Step) })
	return items
}

func callItem(e flowv1alpha1.EffectRecord) timelineItem {
	r := e.Result
	it := timelineItem{Step: e.Step, Kind: "call", Title: string(e.Kind)}
	if e.Agent != "" {
		it.Title += " by agent " + e.Agent
	}
	add := func(name, value string) {
		if value != "" {
			it.Fields = append(it.Fields, field{name, value})
		}
	}
	add("Intent", r.Intent)
	add("Destination", r.Destination)
	add("Confidence", string(r.Confidence))
	add("Result", string(r.ResultType))
	add("Reply", r.Reply)
	add("Reasoning", r.Reasoning)
	add("Outputs", compactJSON(r.Outputs))
	add("Usage", usage(r.Usage))
	if f := r.Failure; f != nil {
		add("Failure", fmt.Sprintf("%s %s in %s: %s", f.Source, f.Kind, cmp.Or(f.Component, "unknown"), f.Message))
	}
	return it
}

// toolItem is a tool call of the timeline, at the step it was planned.
func toolItem(c toolview.Call) timelineItem {
	it := timelineItem{Step: max(c.Step, 0), Kind: "tool", Title: c.Tool + ": " + c.StateText()}
	for _, f := range []field{
		{"Call", c.ID}, {"Pathway", c.Pathway}, {"Arguments", c.ArgsPreview(512)}, {"Duration", c.Duration()},
		{"Approved by", c.ApprovedBy}, {"Error", c.Error},
	} {
		if f.Value != "" {
			it.Fields = append(it.Fields, f)
		}
	}
	return it
}

// messageTexts maps the ids of a Session's messages to their text: from
// spec.messages, else from status.transcript, which keeps the messages that
// kubectl journey say dropped from the spec once processed.
func messageTexts(s *flowv1alpha1.Session) map[string]string {
	msgs := map[string]string{}
	for _, x := range s.Status.Transcript {
		if x.MessageID != "" {
			msgs[x.MessageID] = x.User
		}
	}
	for _, m := range s.Spec.Messages {
		msgs[m.ID] = m.Text
	}
	return msgs
}

// droppedMessage stands for the text of a message neither spec.messages nor the
// transcript keeps any longer.
const droppedMessage = "(its text is no longer kept: processed messages leave spec.messages, and the transcript keeps the latest exchanges)"

func transitionItem(h flowv1alpha1.HistoryEntry, msgs map[string]string) timelineItem {
	it := timelineItem{
		Step: h.Step, Kind: "transition",
		Title: fmt.Sprintf("%s → %s", cmp.Or(h.From, "(start)"), cmp.Or(h.To, "(end)")),
	}
	if !h.Time.IsZero() {
		it.Time = h.Time.UTC().Format(time.RFC3339)
	}
	add := func(name, value string) {
		if value != "" {
			it.Fields = append(it.Fields, field{name, value})
		}
	}
	add("Rule", h.Transition)
	add("Action", string(h.Action))
	add("Decided by", string(h.Source))
	add("Confidence", string(h.Confidence))
	if h.MessageID != "" {
		text, ok := msgs[h.MessageID]
		if !ok || text == "" {
			text = droppedMessage
		}
		add("After message", fmt.Sprintf("%s: %s", h.MessageID, text))
	}
	add("Reason", h.Reason)
	return it
}

func usage(u flowv1alpha1.Usage) string {
	if u.PromptTokens == 0 && u.CompletionTokens == 0 && u.CostUSD == "" {
		return ""
	}
	s := fmt.Sprintf("%d prompt + %d completion tokens", u.PromptTokens, u.CompletionTokens)
	if u.CostUSD != "" {
		s += ", $" + u.CostUSD
	}
	return s
}

func compactJSON(j *apiextensionsv1.JSON) string {
	if j == nil || len(j.Raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, j.Raw); err != nil {
		return string(j.Raw)
	}
	return b.String()
}

func prettyJSON(j *apiextensionsv1.JSON) string {
	if j == nil || len(j.Raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, j.Raw, "", "  "); err != nil {
		return string(j.Raw)
	}
	return b.String()
}

// readyOf is a Journey's Ready condition as text: "True", "False" or "Unknown", with
// the reason and message.
func readyOf(conds []metav1.Condition) (state, detail string) {
	c := meta.FindStatusCondition(conds, "Ready")
	if c == nil {
		return "Unknown", "not reported yet"
	}
	return string(c.Status), strings.TrimSpace(c.Reason + ": " + c.Message)
}

// budgetCard is one Budget on the Budgets page, as the manager last wrote its status.
type budgetCard struct {
	Namespace, Name string
	// Window says the window ("Day in Europe/Berlin"); Span when the current one
	// started and ends, empty before the manager counted the Budget.
	Window, Span string
	// Selects says which Sessions count in it.
	Selects string
	// OnExhausted says what a Session does when a call does not fit.
	OnExhausted string
	Limits      []budgetLimit
	// Conditions are Ready, SoftLimitReached and Exhausted, in that order, then any
	// other; Alerts are those of them a person should look at (not Ready, past the
	// soft limit, exhausted).
	Conditions []budgetCondition
	Alerts     []string
	// Sessions spent in the window, Holding hold a reservation, Waiting wait for
	// room.
	Sessions, Holding, Waiting int32
	// Counted is false until the manager wrote the status; Stale when it describes an
	// older spec than the current one.
	Counted, Stale bool
}

// budgetLimit is one limit of a Budget: what was spent, what calls in flight
// reserve, what is left, the limit, and the share of it spent.
type budgetLimit struct {
	Name, Spent, Reserved, Remaining, Limit string
	// Percent is spent over the limit, for the meter (display only).
	Percent int
}

type budgetCondition struct {
	Type, Status, Reason, Message string
}

// budgetConditionOrder is the order the Budget conditions are shown in.
var budgetConditionOrder = []string{
	flowv1alpha1.ConditionReady, flowv1alpha1.ConditionSoftLimitReached, flowv1alpha1.ConditionExhausted,
}

func budgetOf(b *flowv1alpha1.Budget) budgetCard {
	spec, st := &b.Spec, &b.Status
	c := budgetCard{
		Namespace: b.Namespace, Name: b.Name, Window: cmp.Or(spec.Window, "Day"),
		Sessions: st.Sessions, Holding: st.Holding, Waiting: st.Waiting,
		Counted: st.WindowStart != nil,
		Stale:   st.ObservedGeneration != 0 && st.ObservedGeneration < b.Generation,
	}
	if c.Window == "Day" || c.Window == "Month" {
		c.Window += " in " + cmp.Or(spec.TimeZone, "UTC")
	}
	if st.WindowStart != nil {
		c.Span = "since " + st.WindowStart.UTC().Format("2006-01-02 15:04 MST")
		if st.WindowEnd != nil {
			c.Span += ", until " + st.WindowEnd.UTC().Format("2006-01-02 15:04 MST")
		}
	}
	c.Selects = selects(spec.Selector)
	c.OnExhausted = "Stall: a call that does not fit waits for room"
	if spec.OnExhausted == flowv1alpha1.ExhaustedDegrade && spec.DegradeTo != nil {
		c.OnExhausted = "Degrade: pathways with degrade: Allow switch to agent " + string(spec.DegradeTo.Agent) + "; other calls wait"
	}
	l := spec.Limits
	if l.CostUSD != "" {
		c.Limits = append(c.Limits, budgetLimit{Name: "Cost (USD)", Limit: string(l.CostUSD),
			Spent: st.Spent.CostUSD, Reserved: st.Reserved.CostUSD, Remaining: st.Remaining.CostUSD,
			Percent: percent(decimal(st.Spent.CostUSD), decimal(string(l.CostUSD)))})
	}
	for _, n := range []struct {
		name                       string
		limit                      int64
		spent, reserved, remaining *int64
	}{
		{"Tokens", l.Tokens, st.Spent.Tokens, st.Reserved.Tokens, st.Remaining.Tokens},
		{"Model calls", l.ModelCalls, st.Spent.ModelCalls, st.Reserved.ModelCalls, st.Remaining.ModelCalls},
		{"Tool calls", l.ToolCalls, st.Spent.ToolCalls, st.Reserved.ToolCalls, st.Remaining.ToolCalls},
	} {
		if n.limit > 0 {
			c.Limits = append(c.Limits, budgetLimit{Name: n.name, Limit: fmt.Sprint(n.limit),
				Spent: amount(n.spent), Reserved: amount(n.reserved), Remaining: amount(n.remaining),
				Percent: percent(float64(ptr.Deref(n.spent, 0)), float64(n.limit))})
		}
	}
	conds := slices.Clone(st.Conditions)
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int {
		return cmp.Compare(conditionRank(a.Type), conditionRank(b.Type))
	})
	for _, cond := range conds {
		c.Conditions = append(c.Conditions, budgetCondition{cond.Type, string(cond.Status), cond.Reason, cond.Message})
		bad := cond.Status == metav1.ConditionTrue
		if cond.Type == flowv1alpha1.ConditionReady {
			bad = cond.Status != metav1.ConditionTrue
		}
		if bad {
			c.Alerts = append(c.Alerts, cond.Type+": "+cmp.Or(cond.Message, cond.Reason))
		}
	}
	return c
}

func conditionRank(t string) int {
	if i := slices.Index(budgetConditionOrder, t); i >= 0 {
		return i
	}
	return len(budgetConditionOrder)
}

// selects says which Sessions of its namespace a Budget's selector picks.
func selects(sel flowv1alpha1.BudgetSelector) string {
	var parts []string
	if len(sel.Journeys) > 0 {
		parts = append(parts, "of journeys "+strings.Join(sel.Journeys, ", "))
	}
	if len(sel.MatchLabels) > 0 {
		var labels []string
		for k, v := range sel.MatchLabels {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels)
		parts = append(parts, "labelled "+strings.Join(labels, ", "))
	}
	if len(parts) == 0 {
		return "every Session of the namespace"
	}
	return "Sessions " + strings.Join(parts, " and ")
}

// amount shows an amount of a Budget's status; "" when the manager has not written it.
func amount(v *int64) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(*v)
}

// decimal reads a decimal string of a Budget for the meter; 0 when it is not one.
func decimal(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}

// percent is part of whole in whole percent, within 0 and 100.
func percent(part, whole float64) int {
	if whole <= 0 {
		return 0
	}
	return min(100, max(0, int(part*100/whole)))
}

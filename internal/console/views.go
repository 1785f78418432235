package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

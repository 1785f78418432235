package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/toolview"
)

type sessionView struct {
	Session   *flowv1alpha1.Session
	Row       sessionRow
	Graph     string
	GraphSVG  any
	GraphErr  string
	Path      []string
	LastTurn  *flowv1alpha1.TurnOutcome
	Pending   *approvalItem
	Timeline  []timelineItem
	ToolCalls []toolview.Call
	Messages  []messageView
	Approvals []flowv1alpha1.Approval
	Context   string
	Versions  []versionView
	Usage     string
	Conds     []metav1.Condition
	// TurnFailed is the TurnFailed condition while it is True: the last turn failed.
	TurnFailed *metav1.Condition
	// Blocked says why the Session is blocked (stalled or failed), when it is;
	// Actions are what the page offers then.
	Blocked *metav1.Condition
	Actions []string
	// Asks are the tool calls that wait for the user's answer, when the page may
	// answer them.
	Asks []askView
	// Interventions are the Session's records of the interventions it processed,
	// newest first: a refused one says why (it is not a turn, so the last reply does
	// not show it).
	Interventions []interventionView
}

// interventionView is a processed intervention as the page lists it.
type interventionView struct {
	Step    int64
	ID      string
	Action  string
	By      string
	Refused string
}

// interventionsOf are the records of s's processed interventions, newest first.
func interventionsOf(s *flowv1alpha1.Session) []interventionView {
	recs := s.Status.Interventions
	out := make([]interventionView, 0, len(recs))
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		out = append(out, interventionView{Step: r.Step, ID: r.Intervention.ID, Action: string(r.Intervention.Action), By: r.Intervention.By, Refused: r.Refusal()})
	}
	return out
}

// askView is a tool call that waits for an answer: a question its server asked (a
// form's Fields, or a URL to visit) or an outcome no one knows (Unknown).
type askView struct {
	Call, Tool, Message, URL string
	Unknown, Form            bool
	Fields                   []flowv1alpha1.FormField
	Outcomes                 []string
}

// asksOf are the tool calls of s that wait for an answer.
func asksOf(s *flowv1alpha1.Session) []askView {
	var out []askView
	for c := range s.Status.AnswerableToolCalls() {
		a := askView{Call: c.ID, Tool: c.Tool}
		if e := c.WaitingElicitation(); e != nil {
			a.Message, a.URL, a.Form = e.Message, e.URL, e.Mode == flowv1alpha1.ElicitationForm
			a.Fields = e.FormFields()
			a.Outcomes = []string{string(flowv1alpha1.AnswerAccept), string(flowv1alpha1.AnswerDecline), string(flowv1alpha1.AnswerCancel)}
		} else {
			a.Unknown = true
			a.Outcomes = []string{string(flowv1alpha1.AnswerDone), string(flowv1alpha1.AnswerNotDone), string(flowv1alpha1.AnswerFail)}
		}
		out = append(out, a)
	}
	return out
}

type messageView struct {
	ID, Text  string
	Processed bool
}

type versionView struct {
	Version       int64
	Pathway, Keys string
	// Previous is what the change replaced, Appended what it added to lists.
	Previous, Appended string
}

func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request) {
	s.showSession(w, r, http.StatusOK, layout{Flash: r.URL.Query().Get("done")})
}

// showSession renders the page of the Session of the request with status and the
// layout's flash or error.
func (s *Server) showSession(w http.ResponseWriter, r *http.Request, status int, l layout) {
	key, ok := s.sessionKeyOf(w, r, "session")
	if !ok {
		return
	}
	ctx := r.Context()
	ss := &flowv1alpha1.Session{}
	if err := s.client.Get(ctx, key, ss); err != nil {
		s.apiError(w, r, "session", err)
		return
	}
	v := sessionView{Session: ss, Row: rowOf(ss, s.opts.Now()), LastTurn: ss.Status.LastTurn, Timeline: timeline(ss), ToolCalls: toolview.Of(&ss.Status),
		Approvals: ss.Spec.Approvals, Context: prettyJSON(ss.Status.Context), Usage: usage(ss.Status.Usage), Conds: ss.Status.Conditions}
	if pendingDecision(ss) != nil {
		a := approvalOf(ss)
		v.Pending = &a
	}
	v.TurnFailed = turnFailed(ss)
	v.Interventions = interventionsOf(ss)
	if v.Blocked = blocked(ss); v.Blocked != nil && s.opts.Act != nil {
		v.Actions = actionsFor(ss)
	}
	if s.opts.Act != nil {
		v.Asks = asksOf(ss)
	}
	for i, m := range ss.Spec.Messages {
		v.Messages = append(v.Messages, messageView{m.ID, m.Text, ss.Spec.MessagesDropped+int32(i) < ss.Status.ProcessedMessages})
	}
	for _, cv := range ss.Status.ContextHistory {
		v.Versions = append(v.Versions, versionView{cv.Version, cv.Pathway, strings.Join(cv.Keys, ", "), compactJSON(cv.Previous), compactJSON(cv.Appended)})
	}
	for _, h := range ss.Status.History {
		if len(v.Path) == 0 && h.From != "" {
			v.Path = append(v.Path, h.From)
		}
		if h.To != "" {
			v.Path = append(v.Path, h.To)
		}
	}
	jo, err := s.loadJourney(ctx, types.NamespacedName{Namespace: key.Namespace, Name: ss.Spec.JourneyRef.Name})
	if err == nil {
		path := ss.Status.History
		if path == nil {
			path = []flowv1alpha1.HistoryEntry{}
		}
		v.GraphSVG, err = s.draw(ctx, jo, marks{path: path, current: ss.Status.CurrentPathway}, "Path of session "+ss.Name+" through journey "+jo.journey.Name)
	}
	if err != nil {
		v.GraphErr = "cannot draw the journey: " + err.Error()
	}
	l.Title, l.Nav, l.Page = "Session "+key.Name, "sessions", v
	s.render(w, r, status, "session", l)
}

// turnFailed is the TurnFailed condition of s while it is True.
func turnFailed(s *flowv1alpha1.Session) *metav1.Condition {
	c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionTurnFailed)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// blocked says why s is blocked, as a condition: Stalled while True (a cap, loop
// prevention, a timeout), Ready when it failed; nil when it goes on by itself or
// waits for someone (a failed turn alone is marked, not blocking), or has completed
// or been cancelled.
func blocked(s *flowv1alpha1.Session) *metav1.Condition {
	switch s.Status.Phase {
	case flowv1alpha1.PhaseCompleted, flowv1alpha1.PhaseCancelled:
		return nil
	case flowv1alpha1.PhaseFailed:
		if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionReady); c != nil {
			return c
		}
		return &metav1.Condition{Type: flowv1alpha1.ConditionReady, Reason: flowv1alpha1.ReasonFailed, Message: "The journey failed"}
	}
	if s.Spec.Cancel {
		return nil
	}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, flowv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// actionsFor are the actions offered on blocked Session s: Resume and Retry, and
// Cancel unless it has ended.
func actionsFor(s *flowv1alpha1.Session) []string {
	actions := []string{ActionResume, ActionRetry}
	if !s.Status.Phase.IsTerminal() {
		actions = append(actions, ActionCancel)
	}
	return actions
}

// act resumes, retries or cancels a Session as the caller: the API server (RBAC, the
// admission webhook) decides whether it is allowed and records who did it.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	key, ok := s.sessionKeyOf(w, r, "session")
	if !ok {
		return
	}
	a := Action{Kind: r.PostFormValue("action"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	switch a.Kind {
	case ActionRetry:
		a.Feedback = strings.TrimSpace(r.PostFormValue("feedback"))
	case ActionAnswer:
		a.Call, a.Outcome, a.Result = r.PostFormValue("call"), r.PostFormValue("outcome"), strings.TrimSpace(r.PostFormValue("result"))
		// Form fields come as field.NAME; a field left empty is not given.
		for _, name := range slices.Sorted(maps.Keys(r.PostForm)) {
			if f, ok := strings.CutPrefix(name, "field."); ok && f != "" && strings.TrimSpace(r.PostForm.Get(name)) != "" {
				a.Fields = append(a.Fields, f+"="+strings.TrimSpace(r.PostForm.Get(name)))
			}
		}
	}
	var err error
	var done string
	switch {
	case s.opts.Act == nil:
		err = errors.New("this console offers no actions on Sessions")
	case a.Kind != ActionResume && a.Kind != ActionRetry && a.Kind != ActionCancel && a.Kind != ActionAnswer:
		err = fmt.Errorf("unknown action %q: use Resume, Retry, Cancel or Answer", a.Kind)
	default:
		done, err = s.opts.Act(r.Context(), s.client, key, a)
	}
	if err != nil {
		status := http.StatusConflict
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Code != 0 {
			status = int(st.Status().Code)
		}
		s.showSession(w, r, status, layout{Error: a.Kind + " session " + key.Namespace + "/" + key.Name + ": " + err.Error()})
		return
	}
	msg := a.Kind + " of session " + key.Namespace + "/" + key.Name + ": " + done + "."
	http.Redirect(w, r, "/sessions/"+url.PathEscape(key.Namespace)+"/"+url.PathEscape(key.Name)+"?done="+url.QueryEscape(msg), http.StatusSeeOther)
}

type approvalsView struct {
	Items []approvalItem
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	list, err := s.sessions(r.Context(), filter{})
	if err != nil {
		s.apiError(w, r, "approvals", err)
		return
	}
	var v approvalsView
	for _, ss := range list {
		if pendingDecision(ss) != nil {
			v.Items = append(v.Items, approvalOf(ss))
		}
	}
	q := r.URL.Query()
	s.render(w, r, http.StatusOK, "approvals", layout{Title: "Approvals", Page: v, Flash: q.Get("done")})
}

// answer approves or rejects a decision as the caller: the API server (RBAC, the
// approval webhook) decides whether it is allowed and stamps who gave it.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	a := Answer{
		DecisionID: r.PostFormValue("decision"),
		Reject:     r.PostFormValue("action") == "reject",
		Reason:     strings.TrimSpace(r.PostFormValue("reason")),
	}
	if !a.Reject {
		a.To = r.PostFormValue("to")
	}
	err := s.opts.Approve(r.Context(), s.client, key, a)
	if err != nil {
		status := http.StatusConflict
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Code != 0 {
			status = int(st.Status().Code)
		}
		list, _ := s.sessions(r.Context(), filter{})
		var v approvalsView
		for _, ss := range list {
			if pendingDecision(ss) != nil {
				v.Items = append(v.Items, approvalOf(ss))
			}
		}
		s.render(w, r, status, "approvals", layout{Title: "Approvals", Page: v,
			Error: "session " + key.Namespace + "/" + key.Name + ": " + err.Error()})
		return
	}
	verb := "approved"
	if a.Reject {
		verb = "rejected"
	}
	done := "Decision " + a.DecisionID + " of session " + key.Namespace + "/" + key.Name + " " + verb + "."
	http.Redirect(w, r, "/approvals?done="+url.QueryEscape(done), http.StatusSeeOther)
}

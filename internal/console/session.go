package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	s.render(w, r, http.StatusOK, "session", layout{Title: "Session " + key.Name, Nav: "sessions", Page: v})
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

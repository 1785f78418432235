package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

//go:embed web
var webFS embed.FS

// pages are the parsed templates, one per page, each with the layout.
type pages struct {
	byName map[string]*template.Template
}

var pageNames = []string{"journeys", "journey", "sessions", "session", "approvals", "budgets"}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	funcs := template.FuncMap{"join": strings.Join, "pathEscape": url.PathEscape}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(webFS, "web/templates/layout.html", "web/templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		p.byName[name] = t
	}
	return p, nil
}

// layout is what every page shows around its content.
type layout struct {
	Title, Nav string
	User       string
	Scope      string
	CSRF       string
	Flash      string
	Error      string
	Page       any
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", staticFS())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/journeys", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /journeys", s.journeysPage)
	mux.HandleFunc("GET /journeys/{ns}/{name}", s.journeyPage)
	mux.HandleFunc("GET /sessions", s.sessionsPage)
	mux.HandleFunc("GET /sessions/{ns}/{name}", s.sessionPage)
	mux.HandleFunc("GET /approvals", s.approvalsPage)
	mux.HandleFunc("GET /budgets", s.budgetsPage)
	mux.HandleFunc("POST /approvals/{ns}/{name}", s.answer)
	mux.HandleFunc("POST /sessions/{ns}/{name}/actions", s.act)
	mux.HandleFunc("GET /events/sessions", s.sessionEvents)
	mux.HandleFunc("GET /events/changes", s.changeEvents)
	s.mux = mux
}

// render writes page name with the layout, or only its "content" block when the
// request asks for a fragment (the live parts of a page reload it that way).
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, l layout) {
	l.User, l.Scope, l.CSRF = cmp.Or(s.user, "(unknown user)"), s.scopeText(), s.csrf
	if l.Nav == "" {
		l.Nav = name
	}
	block := "layout"
	if r.URL.Query().Get("fragment") == "1" {
		block = "content"
	}
	var buf bytes.Buffer
	if err := s.pages.byName[name].ExecuteTemplate(&buf, block, l); err != nil {
		http.Error(w, "rendering page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func (s *Server) scopeText() string {
	if slices.Equal(s.scopes, []string{""}) {
		return "all namespaces"
	}
	if len(s.scopes) == 1 {
		return "namespace " + s.scopes[0]
	}
	return "namespaces " + strings.Join(s.scopes, ", ")
}

// inScope says whether ns is one of the namespaces shown.
func (s *Server) inScope(ns string) bool {
	return slices.Equal(s.scopes, []string{""}) || slices.Contains(s.scopes, ns)
}

// apiError shows an error from the API server, with its status code.
func (s *Server) apiError(w http.ResponseWriter, r *http.Request, name string, err error) {
	status := http.StatusBadGateway
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		status = int(st.Status().Code)
	}
	s.render(w, r, status, name, layout{Title: "Error", Error: err.Error()})
}

// sessions are the Sessions of the cache that f selects, newest first.
func (s *Server) sessions(ctx context.Context, f filter) ([]*flowv1alpha1.Session, error) {
	var list flowv1alpha1.SessionList
	var opts []client.ListOption
	if f.Namespace != "" {
		opts = append(opts, client.InNamespace(f.Namespace))
	}
	if err := s.cache.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	var out []*flowv1alpha1.Session
	for i := range list.Items {
		if f.match(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	sortSessions(out)
	return out, nil
}

type journeyCard struct {
	Namespace, Name string
	Ready, Detail   string
	Issues          []string
	Graph           template.HTML
	Pathways        int
	Active          int
}

func (s *Server) journeysPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var cards []journeyCard
	for _, ns := range s.scopes {
		var js flowv1alpha1.JourneyList
		if err := s.client.List(ctx, &js, client.InNamespace(ns)); err != nil {
			s.apiError(w, r, "journeys", err)
			return
		}
		var ps flowv1alpha1.PathwayList
		if err := s.client.List(ctx, &ps, client.InNamespace(ns)); err != nil {
			s.apiError(w, r, "journeys", err)
			return
		}
		for i := range js.Items {
			card, err := s.card(ctx, journeyWithPathways(&js.Items[i], ps.Items))
			if err != nil {
				s.apiError(w, r, "journeys", err)
				return
			}
			cards = append(cards, card)
		}
	}
	s.render(w, r, http.StatusOK, "journeys", layout{Title: "Journeys", Page: cards})
}

func (s *Server) card(ctx context.Context, jo *journeyObjects) (journeyCard, error) {
	j := jo.journey
	c := journeyCard{Namespace: j.Namespace, Name: j.Name, Pathways: len(j.Spec.Pathways), Issues: jo.missing}
	c.Ready, c.Detail = readyOf(j.Status.Conditions)
	for _, cond := range j.Status.Conditions {
		if cond.Type != "Ready" && cond.Status == metav1.ConditionFalse && cond.Message != "" {
			c.Issues = append(c.Issues, cond.Type+": "+cond.Message)
		}
	}
	if c.Ready == string(metav1.ConditionFalse) {
		c.Issues = append(c.Issues, c.Detail)
	}
	counts, err := s.counts(ctx, j)
	if err != nil {
		return c, err
	}
	for _, n := range counts {
		c.Active += n
	}
	c.Graph, err = s.draw(ctx, jo, marks{counts: counts}, "Graph of journey "+j.Name)
	return c, err
}

// counts are the Sessions of j that are not finished, by current pathway.
func (s *Server) counts(ctx context.Context, j *flowv1alpha1.Journey) (map[string]int, error) {
	list, err := s.sessions(ctx, filter{Namespace: j.Namespace, Journey: j.Name})
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, ss := range list {
		if !terminal(phaseOf(ss)) && ss.Status.CurrentPathway != "" {
			counts[ss.Status.CurrentPathway]++
		}
	}
	return counts, nil
}

type journeyView struct {
	journeyCard
	Rows   []countRow
	Phases []countRow
}

type countRow struct {
	Name  string
	Count int
}

func (s *Server) journeyPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	if !s.inScope(key.Namespace) {
		s.render(w, r, http.StatusNotFound, "journey", layout{Title: "Not shown", Nav: "journeys", Error: "namespace " + key.Namespace + " is not shown by this console"})
		return
	}
	jo, err := s.loadJourney(ctx, key)
	if err != nil {
		s.apiError(w, r, "journey", err)
		return
	}
	card, err := s.card(ctx, jo)
	if err != nil {
		s.apiError(w, r, "journey", err)
		return
	}
	counts, _ := s.counts(ctx, jo.journey)
	v := journeyView{journeyCard: card}
	for _, p := range pathwayNames(jo.journey) {
		v.Rows = append(v.Rows, countRow{p, counts[p]})
	}
	all, _ := s.sessions(ctx, filter{Namespace: key.Namespace, Journey: key.Name})
	byPhase := map[flowv1alpha1.Phase]int{}
	for _, ss := range all {
		byPhase[phaseOf(ss)]++
	}
	for _, p := range phases {
		v.Phases = append(v.Phases, countRow{string(p), byPhase[p]})
	}
	s.render(w, r, http.StatusOK, "journey", layout{Title: "Journey " + key.Name, Nav: "journeys", Page: v})
}

type sessionsView struct {
	Filter     filter
	Rows       []sessionRow
	Namespaces []string
	Journeys   []string
	Phases     []flowv1alpha1.Phase
}

func filterOf(r *http.Request) filter {
	q := r.URL.Query()
	return filter{Namespace: q.Get("namespace"), Journey: q.Get("journey"), Phase: q.Get("phase")}
}

func (s *Server) sessionsPage(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r)
	list, err := s.sessions(r.Context(), f)
	if err != nil {
		s.apiError(w, r, "sessions", err)
		return
	}
	all, _ := s.sessions(r.Context(), filter{})
	v := sessionsView{Filter: f, Phases: phases}
	for _, ss := range all {
		v.Namespaces = appendNew(v.Namespaces, ss.Namespace)
		v.Journeys = appendNew(v.Journeys, ss.Spec.JourneyRef.Name)
	}
	for _, ns := range s.scopes {
		if ns != "" {
			v.Namespaces = appendNew(v.Namespaces, ns)
		}
	}
	slices.Sort(v.Namespaces)
	slices.Sort(v.Journeys)
	now := s.opts.Now()
	for _, ss := range list {
		v.Rows = append(v.Rows, rowOf(ss, now))
	}
	s.render(w, r, http.StatusOK, "sessions", layout{Title: "Sessions", Page: v})
}

func appendNew(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// sessionKeyOf reads {ns}/{name} and refuses namespaces outside the scopes.
func (s *Server) sessionKeyOf(w http.ResponseWriter, r *http.Request, page string) (types.NamespacedName, bool) {
	key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	if !s.inScope(key.Namespace) {
		s.render(w, r, http.StatusNotFound, page, layout{Title: "Not shown", Error: fmt.Sprintf("namespace %s is not shown by this console", key.Namespace)})
		return key, false
	}
	return key, true
}

// budgetsPage lists the Budgets of the namespaces shown (of ?namespace= alone when
// given), as the manager last wrote their status.
func (s *Server) budgetsPage(w http.ResponseWriter, r *http.Request) {
	namespaces := s.scopes
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		if !s.inScope(ns) {
			s.render(w, r, http.StatusNotFound, "budgets", layout{Title: "Not shown", Error: "namespace " + ns + " is not shown by this console"})
			return
		}
		namespaces = []string{ns}
	}
	var cards []budgetCard
	for _, ns := range namespaces {
		var list flowv1alpha1.BudgetList
		if err := s.client.List(r.Context(), &list, client.InNamespace(ns)); err != nil {
			s.apiError(w, r, "budgets", err)
			return
		}
		for i := range list.Items {
			cards = append(cards, budgetOf(&list.Items[i]))
		}
	}
	slices.SortFunc(cards, func(a, b budgetCard) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	s.render(w, r, http.StatusOK, "budgets", layout{Title: "Budgets", Page: cards})
}

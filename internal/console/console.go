// Package console is the web console of kubectl journey dashboard: Journeys drawn as
// pictures, Sessions updating live, and the decisions waiting for approval, served on a
// local address. It has no credentials of its own: every read and write goes to the API
// server with the caller's kubeconfig identity, so the cluster's RBAC decides what each
// user sees and may do, and the approval webhook stamps approvals with that user.
// Changes (approvals, and resuming, retrying or cancelling a blocked Session) are protected against cross-site requests by a per-process token
// sent as a cookie and a form field, and by Host and Origin checks.
package console

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Scheme knows the journey types and the built-in types the console reads (and the
// plugin: Events, to tell why an intervention was refused).
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		flowv1alpha1.AddToScheme, corev1.AddToScheme, eventsv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Answer is an approval or a rejection given on the Approvals page.
type Answer struct {
	// DecisionID is the decision answered.
	DecisionID string
	// To overrides the decision's destination; empty keeps it.
	To string
	// Reject rejects the decision.
	Reject bool
	// Reason is recorded with the approval.
	Reason string
}

// Action is what a person does to a Session from its page: Resume, Retry or Cancel a
// blocked one, or Answer a tool call that waits for them.
type Action struct {
	// Kind is Resume, Retry, Cancel or Answer.
	Kind string
	// Reason says why; it is recorded with the change.
	Reason string
	// Feedback, for Retry, is what the pathway's agents are told.
	Feedback string
	// Call, for Answer, is the tool call answered, and Outcome the answer: Accept,
	// Decline or Cancel to what its server asked, Done, NotDone or Fail to a call
	// whose outcome is unknown.
	Call, Outcome string
	// Fields, for Accept, are the form's fields the person filled in, as FIELD=VALUE
	// (as kubectl journey answer takes them); empty ones are left out.
	Fields []string
	// Result, for Done, is the call's result as a JSON object ("" for none).
	Result string
}

// The kinds of Action.
const (
	ActionResume = "Resume"
	ActionRetry  = "Retry"
	ActionCancel = "Cancel"
	ActionAnswer = "Answer"
)

// Options configure a console.
type Options struct {
	// Config is the caller's connection to the cluster; the console never adds
	// credentials to it.
	Config *rest.Config
	// Namespaces limits the console to these namespaces. Empty: every namespace the
	// caller may list Sessions in (all of them when allowed cluster-wide, else those
	// of the namespaces the caller may list, else DefaultNamespace).
	Namespaces []string
	// DefaultNamespace is the kubeconfig context's namespace.
	DefaultNamespace string
	// DOT draws a Journey as Graphviz DOT from its spec, its pathways' specs by local
	// name and the pathway to highlight (empty for none).
	DOT func(journey flowv1alpha1.JourneySpec, pathways map[string]flowv1alpha1.PathwaySpec, current string) string
	// Approve appends an answer to a Session's spec.approvals, acting with c.
	Approve func(ctx context.Context, c client.Client, key types.NamespacedName, a Answer) error
	// Act resumes, retries, cancels or answers a tool call of a Session, acting with
	// c, and says what it did ("intervention i-3 (Resume) sent"). Nil: the Session
	// page offers no actions.
	Act func(ctx context.Context, c client.Client, key types.NamespacedName, a Action) (string, error)
	// Now is the clock shown in pages. Defaults to time.Now.
	Now func() time.Time
}

// Server is a running console.
type Server struct {
	opts    Options
	client  client.Client
	cache   cache.Cache
	session cache.Informer
	// scopes are the namespaces shown; a single "" means all of them.
	scopes []string
	// user is who the API server says the caller is.
	user  string
	csrf  string
	pages *pages
	mux   *http.ServeMux
	// hosts are the Host header values accepted (the listener's address).
	hosts []string
}

// New connects to the cluster as the caller, finds the namespaces to show, and starts
// watching their Sessions. It returns when the first list has arrived; the watch stops
// with ctx.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Config == nil || opts.DOT == nil || opts.Approve == nil {
		return nil, errors.New("console: Config, DOT and Approve are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cfg := rest.CopyConfig(opts.Config)
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, client: c, csrf: newToken()}
	s.user = whoAmI(ctx, c)
	if s.scopes, err = s.findScopes(ctx); err != nil {
		return nil, err
	}
	if err := s.startCache(ctx, cfg); err != nil {
		return nil, err
	}
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func (s *Server) startCache(ctx context.Context, cfg *rest.Config) error {
	copts := cache.Options{Scheme: Scheme}
	if !slices.Equal(s.scopes, []string{""}) {
		copts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range s.scopes {
			copts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	ca, err := cache.New(cfg, copts)
	if err != nil {
		return err
	}
	inf, err := ca.GetInformer(ctx, &flowv1alpha1.Session{})
	if err != nil {
		return err
	}
	go func() { _ = ca.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !ca.WaitForCacheSync(syncCtx) {
		return errors.New("console: Sessions could not be listed and watched within a minute")
	}
	s.cache, s.session = ca, inf
	return nil
}

// Scopes are the namespaces the console shows; a single "" means all namespaces.
func (s *Server) Scopes() []string { return slices.Clone(s.scopes) }

// User is who the API server authenticated the caller as, or "" when it cannot tell.
func (s *Server) User() string { return s.user }

// Serve serves the console on l until ctx ends. Only requests addressed to l's
// address (by IP, or by localhost for a loopback address) are answered.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.hosts = allowedHosts(l.Addr())
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Handler is the console's HTTP handler, with its security checks.
func (s *Server) Handler() http.Handler { return s.secure(s.mux) }

// whoAmI asks the API server who the caller is (a SelfSubjectReview).
func whoAmI(ctx context.Context, c client.Client) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return ""
	}
	return review.Status.UserInfo.Username
}

// findScopes picks the namespaces to show (see Options.Namespaces).
func (s *Server) findScopes(ctx context.Context) ([]string, error) {
	if len(s.opts.Namespaces) > 0 {
		return slices.Clone(s.opts.Namespaces), nil
	}
	if s.canWatchSessions(ctx, "") {
		return []string{""}, nil
	}
	var nss corev1.NamespaceList
	if err := s.client.List(ctx, &nss); err == nil {
		var scopes []string
		for _, ns := range nss.Items {
			if s.canWatchSessions(ctx, ns.Name) {
				scopes = append(scopes, ns.Name)
			}
		}
		if len(scopes) == 0 {
			return nil, errors.New("you may not list and watch Sessions in any namespace")
		}
		return scopes, nil
	}
	if ns := s.opts.DefaultNamespace; ns != "" && s.canWatchSessions(ctx, ns) {
		return []string{ns}, nil
	}
	return nil, fmt.Errorf("you may not list and watch Sessions in namespace %q; choose one with -n", s.opts.DefaultNamespace)
}

// canWatchSessions asks the API server whether the caller may list and watch Sessions
// in ns ("" for every namespace).
func (s *Server) canWatchSessions(ctx context.Context, ns string) bool {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: flowv1alpha1.GroupVersion.Group, Resource: "sessions",
			},
		}}
		if err := s.client.Create(ctx, review); err != nil || !review.Status.Allowed {
			return false
		}
	}
	return true
}

// staticFS serves the embedded stylesheet and script.
func staticFS() http.Handler {
	sub, err := fs.Sub(webFS, "web/static")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

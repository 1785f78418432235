package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// PathPrefix is where the journeys' agents are served: /a2a/<namespace>/<journey>,
// with the agent card at /a2a/<namespace>/<journey>/.well-known/agent-card.json.
const PathPrefix = "/a2a/"

// maxRequestBytes bounds a request's body: a message of MaxMessageBytes, JSON-escaped,
// with room for its envelope.
const maxRequestBytes = 8*MaxMessageBytes + 16*1024

// Options configure a Gateway.
type Options struct {
	// Reader reads Journeys and Pathways for the agent cards, with the gateway's own
	// identity.
	Reader client.Reader
	// Authenticator tells who holds a request's bearer token.
	Authenticator Authenticator
	// Impersonator makes the clients that act as the callers.
	Impersonator Impersonator
	// Namespaces, when set, are the only namespaces whose journeys are served.
	Namespaces []string
	// PublicURL is the gateway's URL as clients reach it (the agent cards' URLs start
	// with it); empty means the scheme and host of each request.
	PublicURL string
	// RatePerSecond and Burst limit each caller's requests (0: no limit).
	RatePerSecond float64
	Burst         int
	// MaxWait bounds how long a blocking message/send or tasks/cancel waits for the
	// Session to answer (default 5 minutes); it then answers with the task as it is.
	MaxWait time.Duration
	// Now is the clock that stamps approvals (default time.Now).
	Now func() time.Time
	// Log receives request errors.
	Log logr.Logger
}

// Gateway serves one A2A agent per Journey. It keeps no conversation state: every
// request reads and writes the Sessions, as the caller, so any replica answers any
// request and a restart loses nothing.
type Gateway struct {
	o      Options
	limits *callerLimits
}

// New is a Gateway with options o.
func New(o Options) *Gateway {
	if o.MaxWait <= 0 {
		o.MaxWait = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Gateway{o: o, limits: newCallerLimits(o.RatePerSecond, max(o.Burst, 1))}
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || !g.serves(parts[0]) || len(validation.IsDNS1123Subdomain(parts[1])) > 0 {
		http.NotFound(w, r)
		return
	}
	key := types.NamespacedName{Namespace: parts[0], Name: parts[1]}
	switch {
	case len(parts) == 2 || parts[2] == "":
		g.serveAgent(w, r, key)
	case parts[2] == strings.TrimPrefix(a2asrv.WellKnownAgentCardPath, "/"):
		g.serveCard(w, r, key)
	default:
		http.NotFound(w, r)
	}
}

func (g *Gateway) serves(namespace string) bool {
	if len(validation.IsDNS1123Label(namespace)) > 0 {
		return false
	}
	if len(g.o.Namespaces) == 0 {
		return true
	}
	for _, ns := range g.o.Namespaces {
		if ns == namespace {
			return true
		}
	}
	return false
}

// agentURL is the URL of journey key's agent, as clients reach it.
func (g *Gateway) agentURL(r *http.Request, key types.NamespacedName) string {
	base := strings.TrimSuffix(g.o.PublicURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + PathPrefix + key.Namespace + "/" + key.Name
}

// serveCard serves the agent card of journey key, read with the gateway's identity.
func (g *Gateway) serveCard(w http.ResponseWriter, r *http.Request, key types.NamespacedName) {
	card, err := g.card(r.Context(), key, g.agentURL(r, key))
	if apierrors.IsNotFound(err) {
		http.Error(w, fmt.Sprintf("journey %s not found", key), http.StatusNotFound)
		return
	}
	if err != nil {
		g.o.Log.Error(err, "Reading the agent card", "journey", key)
		http.Error(w, "reading the journey failed", http.StatusInternalServerError)
		return
	}
	a2asrv.NewStaticAgentCardHandler(card).ServeHTTP(w, r)
}

// card is the agent card of journey key, served at url.
func (g *Gateway) card(ctx context.Context, key types.NamespacedName, url string) (*a2a.AgentCard, error) {
	j := &flowv1.Journey{}
	if err := g.o.Reader.Get(ctx, key, j); err != nil {
		return nil, err
	}
	pathways := map[string]*flowv1.PathwaySpec{}
	for _, e := range j.Spec.Pathways {
		p := &flowv1.Pathway{}
		err := g.o.Reader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: e.PathwayRef}, p)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pathways[string(e.Name)] = &p.Spec
	}
	return Card(j, pathways, url), nil
}

// serveAgent serves the JSON-RPC transport of journey key's agent (the A2A SDK's),
// for an authenticated caller within their rate limit. Its streams' Server-Sent Events
// carry the gateway's event ids, and a Last-Event-ID header is taken by
// tasks/resubscribe.
func (g *Gateway) serveAgent(w http.ResponseWriter, r *http.Request, key types.NamespacedName) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "the agent takes JSON-RPC requests (POST); its card is at "+a2asrv.WellKnownAgentCardPath, http.StatusMethodNotAllowed)
		return
	}
	token, ok := bearerToken(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="journey-operator"`)
		http.Error(w, "an Authorization: Bearer <token> header is required", http.StatusUnauthorized)
		return
	}
	caller, err := g.o.Authenticator.Authenticate(r.Context(), token)
	if errors.Is(err, ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="journey-operator", error="invalid_token"`)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if err != nil {
		g.o.Log.Error(err, "Authenticating a request")
		http.Error(w, "authenticating the request failed", http.StatusServiceUnavailable)
		return
	}
	if !g.limits.allow(caller.Name) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("too many requests from %s", caller.Name), http.StatusTooManyRequests)
		return
	}
	c, err := g.o.Impersonator.ClientFor(caller)
	if err != nil {
		g.o.Log.Error(err, "Creating a client for the caller", "caller", caller.Name)
		http.Error(w, "acting as the caller failed", http.StatusInternalServerError)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	h := &journeyHandler{
		c: c, namespace: key.Namespace, journey: key.Name, caller: caller, now: g.o.Now, maxWait: g.o.MaxWait,
		lastEventID: r.Header.Get(LastEventIDHeader),
	}
	a2asrv.NewJSONRPCHandler(h).ServeHTTP(&sseEventIDs{ResponseWriter: w}, r)
}

// ForConfig fills in o's Reader, Authenticator and Impersonator from the gateway's
// own REST config cfg: it reads Journeys and Pathways and reviews tokens with cfg, and
// impersonates the callers with it. Audiences are the audiences tokens must be meant
// for (empty: the API server's).
func ForConfig(cfg *rest.Config, o Options, audiences []string) (Options, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return o, err
	}
	if err := flowv1.AddToScheme(scheme); err != nil {
		return o, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return o, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return o, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return o, err
	}
	o.Reader = c
	o.Authenticator = TokenReview{Client: c, Audiences: audiences}
	o.Impersonator = Impersonator{Config: cfg, Scheme: scheme, Mapper: mapper}
	return o, nil
}

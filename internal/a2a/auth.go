package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Caller is who sent a request, as the cluster authenticated them.
type Caller struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Authenticator tells who holds a bearer token.
type Authenticator interface {
	// Authenticate returns the token's user, or ErrUnauthenticated.
	Authenticate(ctx context.Context, token string) (*Caller, error)
}

// ErrUnauthenticated is a token the cluster does not accept.
var ErrUnauthenticated = errors.New("the bearer token is not accepted by the cluster")

// TokenReview authenticates tokens with the cluster's TokenReview API, as the API
// server itself would: service account tokens, and whatever other tokens its
// authenticators (OIDC, webhooks) accept.
type TokenReview struct {
	// Client creates the TokenReviews: the gateway's own identity.
	Client client.Client
	// Audiences, when set, are the audiences the token must be meant for.
	Audiences []string
}

// Authenticate implements Authenticator.
func (a TokenReview) Authenticate(ctx context.Context, token string) (*Caller, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.Audiences}}
	if err := a.Client.Create(ctx, tr); err != nil {
		return nil, fmt.Errorf("reviewing the bearer token: %w", err)
	}
	if !tr.Status.Authenticated {
		return nil, ErrUnauthenticated
	}
	u := tr.Status.User
	c := &Caller{Name: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		c.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			c.Extra[k] = v
		}
	}
	return c, nil
}

// Impersonator makes clients that act as a caller: every request they make is
// authorized by the cluster's RBAC and admission as the caller's own.
type Impersonator struct {
	// Config is the gateway's own REST config; it needs the right to impersonate.
	Config *rest.Config
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
}

// ClientFor is a client that acts as c.
func (i Impersonator) ClientFor(c *Caller) (client.WithWatch, error) {
	cfg := rest.CopyConfig(i.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: c.Name, UID: c.UID, Groups: c.Groups, Extra: c.Extra}
	return client.NewWithWatch(cfg, client.Options{Scheme: i.Scheme, Mapper: i.Mapper})
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// maxCallers bounds how many callers' rate limiters are kept; past it they start
// again full.
const maxCallers = 10000

// callerLimits limits each caller's requests: a token bucket per user name.
type callerLimits struct {
	rate  rate.Limit
	burst int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

func newCallerLimits(perSecond float64, burst int) *callerLimits {
	return &callerLimits{rate: rate.Limit(perSecond), burst: burst, limiters: map[string]*rate.Limiter{}}
}

// allow reports whether the caller may make a request now.
func (l *callerLimits) allow(name string) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.limiters[name]
	if !ok {
		if len(l.limiters) >= maxCallers {
			clear(l.limiters)
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.limiters[name] = lim
	}
	return lim.Allow()
}

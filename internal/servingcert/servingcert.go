// Package servingcert gives the webhook server a serving certificate that the manager
// provisions itself, for clusters without cert-manager. The manager generates a CA and
// a serving certificate for the webhook Service, stores both in a Secret of its own
// namespace, injects the CA into the webhook configurations' caBundle, and renews them
// before they expire. The Secret is mounted into the manager's pod, where the webhook
// server reads tls.crt and tls.key and reloads them when they change.
//
// The rotation is github.com/open-policy-agent/cert-controller's rotator, which
// Gatekeeper and other operators run for the same purpose.
package servingcert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// CAName is the common name of the CA the manager generates.
const CAName = "journey-operator-webhook-ca"

// Options say where the certificate is kept, whom it names and who must trust it.
type Options struct {
	// Secret is where the CA and the serving certificate are kept (ca.crt, ca.key,
	// tls.crt, tls.key). It must exist: the install creates it empty, so that the
	// manager needs to update only this Secret and never to create one.
	Secret types.NamespacedName
	// DNSName is the name the API server calls the webhook server by: the webhook
	// Service's <name>.<namespace>.svc. ExtraDNSNames are further names.
	DNSName       string
	ExtraDNSNames []string
	// CertDir is where the Secret is mounted and the webhook server reads the
	// certificate.
	CertDir string
	// MutatingWebhook and ValidatingWebhook are the webhook configurations that get
	// the CA in every webhook's clientConfig.caBundle.
	MutatingWebhook, ValidatingWebhook string
	// Name names the rotation's controller in logs and metrics; empty means
	// webhook-serving-cert. Controller names are unique in a process, so two
	// Provisioners in one process need two names.
	Name string
}

func (o Options) validate() error {
	var errs []error
	if o.Secret.Namespace == "" || o.Secret.Name == "" {
		errs = append(errs, errors.New("the certificate's Secret needs a namespace and a name"))
	}
	if o.DNSName == "" {
		errs = append(errs, errors.New("no DNS name for the serving certificate"))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("no certificate directory"))
	}
	if o.MutatingWebhook == "" || o.ValidatingWebhook == "" {
		errs = append(errs, errors.New("the mutating and validating webhook configurations need names"))
	}
	return errors.Join(errs...)
}

// Provisioner provisions the serving certificate: Server wraps the manager's webhook
// server, Add registers the rotator once the manager exists.
type Provisioner struct {
	opts  Options
	ready chan struct{}
}

// New checks o and returns its Provisioner.
func New(o Options) (*Provisioner, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Provisioner{opts: o, ready: make(chan struct{})}, nil
}

// Ready is closed once the serving certificate is in CertDir and the CA is in both
// webhook configurations.
func (p *Provisioner) Ready() <-chan struct{} { return p.ready }

// Add registers the rotator with mgr. Every replica runs it (it does not wait for
// leadership: a standby must serve the webhook too).
func (p *Provisioner) Add(mgr manager.Manager) error {
	o := p.opts
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      o.Secret,
		CertDir:        o.CertDir,
		CAName:         CAName,
		CAOrganization: "journey-operator",
		DNSName:        o.DNSName,
		ExtraDNSNames:  o.ExtraDNSNames,
		IsReady:        p.ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.MutatingWebhook, Type: rotator.Mutating},
			{Name: o.ValidatingWebhook, Type: rotator.Validating},
		},
		FieldOwner:     "journey-operator",
		ControllerName: cmp.Or(o.Name, "webhook-serving-cert"),
	})
	if err != nil {
		return fmt.Errorf("serving certificate rotator: %w", err)
	}
	return nil
}

// Server is s, started only once the certificate is ready: the webhook server reads
// its certificate when it starts and fails without one.
func (p *Provisioner) Server(s webhook.Server) webhook.Server {
	return &waitingServer{Server: s, ready: p.ready}
}

type waitingServer struct {
	webhook.Server
	ready <-chan struct{}
}

// Start waits for the certificate, then serves until ctx ends.
func (s *waitingServer) Start(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	return s.Server.Start(ctx)
}

// StartedChecker fails until the certificate is ready and the server serves: a
// readiness check, so a replica gets webhook traffic only once it can answer.
func (s *waitingServer) StartedChecker() healthz.Checker {
	started := s.Server.StartedChecker()
	return func(req *http.Request) error {
		select {
		case <-s.ready:
			return started(req)
		default:
			return errors.New("the webhook serving certificate is not ready yet")
		}
	}
}

var _ manager.Runnable = (*waitingServer)(nil)

package main

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/journeyops/journey-operator/internal/servingcert"
)

// Where the webhook server's serving certificate comes from.
const (
	// certMounted: tls.crt and tls.key are in --webhook-cert-dir, mounted from a
	// Secret that cert-manager or the cluster's administrator fills.
	certMounted = "mounted"
	// certSelf: the manager generates, stores, rotates and injects them itself.
	certSelf = "self"
)

// certFlags are the settings of the webhook server's serving certificate.
type certFlags struct {
	source, dir        string
	secret, service    string
	mutating, validate string
}

func (c *certFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.source, "webhook-certificate", certMounted, "Where the webhook's serving certificate comes from: mounted (tls.crt and tls.key in --webhook-cert-dir, from cert-manager or a provided Secret) or self (the manager generates a CA and a certificate for --webhook-service, keeps them in --webhook-cert-secret, renews them and injects the CA into the webhook configurations).")
	fs.StringVar(&c.dir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory the webhook server reads tls.crt and tls.key from (where the certificate's Secret is mounted).")
	fs.StringVar(&c.secret, "webhook-cert-secret", "", "With --webhook-certificate=self: NAMESPACE/NAME of the existing Secret that holds the CA and the serving certificate.")
	fs.StringVar(&c.service, "webhook-service", "", "With --webhook-certificate=self: NAMESPACE/NAME of the webhook Service; the certificate names NAME.NAMESPACE.svc.")
	fs.StringVar(&c.mutating, "mutating-webhook-configuration", "", "With --webhook-certificate=self: the MutatingWebhookConfiguration that gets the CA.")
	fs.StringVar(&c.validate, "validating-webhook-configuration", "", "With --webhook-certificate=self: the ValidatingWebhookConfiguration that gets the CA.")
}

// provisioner returns the serving certificate's Provisioner for
// --webhook-certificate=self, nil for mounted.
func (c certFlags) provisioner() (*servingcert.Provisioner, error) {
	switch c.source {
	case certMounted:
		return nil, nil
	case certSelf:
	default:
		return nil, fmt.Errorf("--webhook-certificate=%q: want %s or %s", c.source, certMounted, certSelf)
	}
	secret, err := namespacedName("--webhook-cert-secret", c.secret)
	if err != nil {
		return nil, err
	}
	svc, err := namespacedName("--webhook-service", c.service)
	if err != nil {
		return nil, err
	}
	host := svc.Name + "." + svc.Namespace + ".svc"
	return servingcert.New(servingcert.Options{
		Secret:            secret,
		DNSName:           host,
		ExtraDNSNames:     []string{host + ".cluster.local"},
		CertDir:           c.dir,
		MutatingWebhook:   c.mutating,
		ValidatingWebhook: c.validate,
	})
}

// webhookServer is the manager's webhook server, which with a self-provisioned
// certificate starts once the certificate is ready.
func (c certFlags) webhookServer(p *servingcert.Provisioner) crwebhook.Server {
	s := crwebhook.NewServer(crwebhook.Options{CertDir: c.dir})
	if p == nil {
		return s
	}
	return p.Server(s)
}

func namespacedName(flagName, v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%s=%q: want NAMESPACE/NAME", flagName, v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

package testenv

import (
	"fmt"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// StartWithWebhooks is Start plus admission webhooks: it installs the webhook
// configurations found in paths (directories or files; default config/webhook),
// pointed at a local serving address with a generated CA. Serve them from a manager
// whose webhook server uses WebhookServerOptions; until it runs, requests the webhooks
// intercept fail. Stop it with env.Stop().
func StartWithWebhooks(paths ...string) (*Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		paths = []string{filepath.Join(RepoRoot(), "config", "webhook")}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: paths},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return &Environment{Environment: env, Config: cfg}, nil
}

// WebhookServerOptions are the options of a webhook server that serves the webhooks
// StartWithWebhooks installed.
func (e *Environment) WebhookServerOptions() webhook.Options {
	o := e.WebhookInstallOptions
	return webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}
}

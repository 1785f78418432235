package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ManagerOptions configure a manager the harness runs in process.
type ManagerOptions struct {
	// Setup registers what the manager runs, for example
	// controller.Setup(mgr, controller.Options{Agents: ...}) with an injected agent
	// factory, or webhook.SetupWebhooks(mgr, webhook.Options{Clock: ..., Checks:
	// controller.AdmissionChecks()}) with an injected clock. The harness cannot call those itself: the controller package's own
	// tests use it.
	Setup func(ctrl.Manager) error
	// Namespaces restricts the manager's cache (and so what it reconciles) to these
	// namespaces; empty means every namespace.
	Namespaces []string
	// Cache is the base cache configuration, for example controller.CacheOptions(shard).
	Cache cache.Options
	// UserAgent, when set, is the manager's user agent, so its writes can be told apart
	// in managedFields.
	UserAgent string
	// QPS and Burst, when set, replace the control plane's (unlimited) client limits.
	QPS   float32
	Burst int
	// Webhooks serves the webhooks that WithWebhooks installed.
	Webhooks bool
	// WebhookServer, when set with Webhooks, builds that webhook server from the
	// options that serve them: to read another certificate, or to wrap the server.
	WebhookServer func(crwebhook.Options) crwebhook.Server
}

// Manager is a controller-runtime manager the harness created: Start runs it in the
// background (once), Stop stops it; the embedded Manager is the controller-runtime one.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// NewManager creates a manager on the control plane and calls o.Setup; Start runs it.
// Metrics and health probes are off, and several managers may register controllers of
// the same name in one process.
func (e *Environment) NewManager(o ManagerOptions) (*Manager, error) {
	cfg := rest.CopyConfig(e.Config)
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	if o.QPS > 0 {
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
	}
	cacheOpts := o.Cache
	if len(o.Namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	opts := ctrl.Options{
		Scheme:                 Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOpts,
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if o.Webhooks {
		opts.WebhookServer = crwebhook.NewServer(e.WebhookServerOptions())
		if o.WebhookServer != nil {
			opts.WebhookServer = o.WebhookServer(e.WebhookServerOptions())
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if o.Setup != nil {
		if err := o.Setup(mgr); err != nil {
			return nil, err
		}
	}
	return &Manager{Manager: mgr}, nil
}

// Start runs the manager in the background until Stop.
func (m *Manager) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan error, 1)
	go func() { m.done <- m.Manager.Start(ctx) }()
}

// Stop stops the manager and returns what its Start returned. It may be called more
// than once; later calls return the same error.
func (m *Manager) Stop() error {
	m.stop()
	return m.err
}

// stop stops the manager and reports whether this call did.
func (m *Manager) stop() (first bool) {
	m.once.Do(func() {
		first = true
		if m.cancel != nil {
			m.cancel()
			m.err = <-m.done
		}
	})
	return first
}

// WaitForWebhooks waits until the manager's webhook server serves.
func (m *Manager) WaitForWebhooks(timeout time.Duration) error {
	started := m.GetWebhookServer().StartedChecker()
	return Poll(timeout, func() error {
		if err := started(nil); err != nil {
			return fmt.Errorf("webhook server not serving: %w", err)
		}
		return nil
	})
}

// RunManager creates and starts a manager that runs until env.Stop: the manager of a
// whole test binary (TestMain) or of a program.
func (e *Environment) RunManager(o ManagerOptions) (*Manager, error) {
	m, err := e.NewManager(o)
	if err != nil {
		return nil, err
	}
	m.Start()
	e.managers = append(e.managers, m)
	return m, nil
}

// StartManager creates and starts a manager that runs until the test ends (or until
// its Stop); an error from it fails the test (when the test stopped it, the test
// checks what Stop returned).
func (e *Environment) StartManager(t testing.TB, o ManagerOptions) *Manager {
	t.Helper()
	m, err := e.NewManager(o)
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	m.Start()
	t.Cleanup(func() {
		if m.stop() && m.err != nil {
			t.Errorf("manager: %v", m.err)
		}
	})
	return m
}

// Package testenv is the project's test harness. It starts a real control plane
// (kube-apiserver and etcd built by hack/setup-envtest.sh) with the project's CRDs and,
// optionally, its admission webhooks; gives each test a namespace of its own; runs
// managers with the project's reconcilers until the test ends; writes kubeconfig files
// for kubectl and for the manager binary; polls for conditions with a clear failure
// message; and serves a scriptable OpenAI-compatible chat-completions endpoint
// (ChatServer) for the real go-openai client. The tests, the demo and the bench use it.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/modfile"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// modulePath is this module's path, as go.mod declares it.
const modulePath = "github.com/journeyops/journey-operator"

// RepoRoot is the module root: found from this file's location, or, in a binary built
// with -trimpath (where that location is the module path, not a directory), from the
// working directory up to the go.mod that declares this module. It is found once.
var RepoRoot = sync.OnceValue(func() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("finding the module root: %v", err))
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == modulePath {
			return dir
		}
		if filepath.Dir(dir) == dir {
			panic(fmt.Sprintf("finding the module root: no go.mod of %s in %s or above", modulePath, wd))
		}
	}
})

// Assets returns the directory with kube-apiserver and etcd: $KUBEBUILDER_ASSETS when
// set, else bin/envtest, building the binaries with hack/setup-envtest.sh if needed.
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root := RepoRoot()
	dir := filepath.Join(root, "bin", "envtest")
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil {
		return dir, nil
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "setup-envtest.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building envtest binaries: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Environment is a running control plane.
type Environment struct {
	*envtest.Environment
	// Config is the admin's REST config, without client-side rate limiting to speak of.
	Config *rest.Config
	// Client is an admin client with Scheme: it plays the users and writes fixtures.
	Client client.Client

	managers []*Manager
}

// Stop stops the managers RunManager started, then the control plane.
func (e *Environment) Stop() error {
	var errs []error
	for i := len(e.managers) - 1; i >= 0; i-- {
		if err := e.managers[i].Stop(); err != nil {
			errs = append(errs, fmt.Errorf("manager: %w", err))
		}
	}
	e.managers = nil
	return errors.Join(append(errs, e.Environment.Stop())...)
}

// Option configures Start.
type Option func(*envtest.Environment)

// WithWebhooks installs the admission webhooks found in paths (directories or files;
// default config/webhook), pointed at a local serving address with a generated CA.
// Serve them from a manager started with ManagerOptions.Webhooks; until it runs, the
// requests they intercept fail.
func WithWebhooks(paths ...string) Option {
	if len(paths) == 0 {
		paths = []string{filepath.Join(RepoRoot(), "config", "webhook")}
	}
	return func(e *envtest.Environment) { e.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: paths} }
}

// WithoutCRDs starts a control plane with no CRDs, for tests that install them the way
// users do (the Helm chart, kustomize).
func WithoutCRDs() Option {
	return func(e *envtest.Environment) { e.CRDDirectoryPaths, e.ErrorIfCRDPathMissing = nil, false }
}

// WithEncryptionProviderConfig starts kube-apiserver with
// --encryption-provider-config=path: an apiserver.config.k8s.io EncryptionConfiguration
// saying which resources are encrypted in etcd, and how. etcd's client URL is
// env.ControlPlane.Etcd.URL, for tests that read what the API server stored.
func WithEncryptionProviderConfig(path string) Option {
	return func(e *envtest.Environment) {
		e.ControlPlane.GetAPIServer().Configure().Set("encryption-provider-config", path)
	}
}

// Start starts kube-apiserver and etcd and installs the CRDs of config/crd/bases.
// Stop it with env.Stop().
func Start(opts ...Option) (*Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	env, cfg, err := startControlPlane(assets, opts)
	if err != nil {
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	// Tests create objects quickly; the client-side limiter would dominate timings.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Environment{Environment: env, Config: cfg, Client: c}, nil
}

// StartWithWebhooks is Start(WithWebhooks(paths...)).
func StartWithWebhooks(paths ...string) (*Environment, error) {
	return Start(WithWebhooks(paths...))
}

// WebhookServerOptions are the options of a webhook server that serves the webhooks
// WithWebhooks installed.
func (e *Environment) WebhookServerOptions() webhook.Options {
	o := e.WebhookInstallOptions
	return webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}
}

// startAttempts is how many times startControlPlane starts a control plane whose API
// server did not create the default namespace in time.
const startAttempts = 3

// startControlPlane starts kube-apiserver and etcd with opts applied. envtest gives a
// new API server a fixed 5 s to create the default namespace, which a machine busy
// with other test binaries can miss although the API server is sound: such a control
// plane is stopped and a new one started, up to startAttempts times. Each process may
// take a minute to start (envtest's default is 20 s) unless
// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT says otherwise.
func startControlPlane(assets string, opts []Option) (*envtest.Environment, *rest.Config, error) {
	for attempt := 1; ; attempt++ {
		env := &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
		}
		if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
			env.ControlPlaneStartTimeout = time.Minute
		}
		// The control plane lives as long as a test binary or the demo and is thrown
		// away after it: etcd need not wait for every write to reach the disk.
		env.ControlPlane.Etcd = &envtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "true")
		for _, o := range opts {
			o(env)
		}
		cfg, err := env.Start()
		if err == nil {
			return env, cfg, nil
		}
		_ = env.Stop()
		if attempt == startAttempts || !strings.Contains(err.Error(), "default namespace didn't register") {
			return nil, nil, err
		}
	}
}

// Command manager runs the journey-operator controllers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/servingcert"
	"github.com/journeyops/journey-operator/internal/tracing"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// flags are the manager's command-line settings.
type flags struct {
	metricsAddr, probeAddr, advance string
	shardSelector, watchNamespaces  string
	leaderElect, secureMetrics      bool
	enableWebhooks                  bool
	tracing, traceContent           bool
	auditLog                        string
	auditOTLP                       bool
	concurrency                     int
	qps                             float64
	burst                           int
	certs                           certFlags
}

func (f *flags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (:8443 for HTTPS, :8080 for HTTP, 0 to disable).")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader so that only one manager is active (active/standby).")
	fs.BoolVar(&f.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	fs.BoolVar(&f.enableWebhooks, "enable-webhooks", true, "Serve the Session admission webhook (stamps and authorizes approvals). Needs a serving certificate: see --webhook-certificate.")
	f.certs.bind(fs)
	fs.IntVar(&f.concurrency, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "Sessions stepped in parallel; also the most agent calls in flight.")
	fs.StringVar(&f.advance, "advance", string(controller.AdvanceWatch), "How Running Sessions get their next step: watch or requeue.")
	fs.StringVar(&f.shardSelector, "shard-selector", "", "Label selector of the Sessions this manager runs, e.g. 'journey.dev/shard=a' (empty: all). Each shard elects its own leader.")
	fs.StringVar(&f.watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces whose Journeys, Pathways and Sessions this manager runs (empty: every namespace). With a list, the manager needs Roles in those namespaces only, not a ClusterRole.")
	fs.Float64Var(&f.qps, "kube-api-qps", 200, "Client queries per second to the API server, per resource type (each step writes one Session status).")
	fs.IntVar(&f.burst, "kube-api-burst", 400, "Client burst to the API server, per resource type.")
	fs.BoolVar(&f.tracing, "tracing", false, "Record an OpenTelemetry trace per Session, exported over OTLP/HTTP as the standard OTEL_EXPORTER_OTLP_* variables say (endpoint, headers, timeout). Off: no spans, no cost.")
	fs.StringVar(&f.auditLog, "audit-log", "", "File the audit records (docs/security.md) are appended to as JSON lines, '-' for standard output. Empty: no file. A Session takes no step before the records of its last status write are written.")
	fs.BoolVar(&f.auditOTLP, "audit-otlp", false, "Send the audit records as OpenTelemetry logs over OTLP/HTTP, as the standard OTEL_EXPORTER_OTLP_LOGS_* (or OTEL_EXPORTER_OTLP_*) variables say.")
	fs.BoolVar(&f.traceContent, "trace-content", false, "With --tracing, record message and answer text in spans (off: only names, numbers and decisions). API keys are never recorded.")
}

// parseNamespaces reads --watch-namespaces: nil (every namespace) for an empty list,
// else one entry per distinct namespace, each a valid namespace name.
func parseNamespaces(list string) (map[string]cache.Config, error) {
	var namespaces map[string]cache.Config
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if namespaces == nil {
			namespaces = map[string]cache.Config{}
		}
		namespaces[ns] = cache.Config{}
	}
	return namespaces, nil
}

// cacheOptions are the controllers' cache options for shard, restricted to
// namespaces when that is not nil: the informers list and watch only there, so the
// manager neither sees nor steps Sessions elsewhere, and needs no cluster-wide access.
func cacheOptions(shard labels.Selector, namespaces map[string]cache.Config) cache.Options {
	opts := controller.CacheOptions(shard)
	opts.DefaultNamespaces = namespaces
	return opts
}

func main() {
	var f flags
	f.bind(flag.CommandLine)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	// Above verbosity 7 client-go logs request bodies: whole Sessions and Secrets.
	ctrl.SetLogger(audit.CapVerbosity(zap.New(zap.UseFlagOptions(&opts)), audit.MaxLogVerbosity))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flowv1.AddToScheme(scheme))

	shard, err := labels.Parse(f.shardSelector)
	if err != nil {
		log.Error(err, "Invalid --shard-selector", "selector", f.shardSelector)
		os.Exit(2)
	}
	namespaces, err := parseNamespaces(f.watchNamespaces)
	if err != nil {
		log.Error(err, "Invalid --watch-namespaces", "namespaces", f.watchNamespaces)
		os.Exit(2)
	}

	certs, err := f.certs.provisioner()
	if err != nil {
		log.Error(err, "Invalid webhook certificate flags")
		os.Exit(2)
	}
	if !f.enableWebhooks {
		certs = nil
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	metricsOpts := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.secureMetrics}
	if f.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: f.probeAddr,
		LeaderElection:         f.leaderElect,
		LeaderElectionID:       controller.LeaderElectionID(shard),
		Cache:                  cacheOptions(shard, namespaces),
		WebhookServer:          f.certs.webhookServer(certs),
	})
	if err != nil {
		log.Error(err, "Unable to create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	traces, err := startTracing(ctx, f)
	if err != nil {
		log.Error(err, "Unable to set up tracing")
		os.Exit(1)
	}
	trail, closeAudit, err := startAudit(ctx, f)
	if err != nil {
		log.Error(err, "Unable to set up the audit trail")
		os.Exit(1)
	}
	if err := setup(mgr, f, shard, traces, trail, certs); err != nil {
		log.Error(err, "Unable to set up the manager")
		os.Exit(1)
	}

	log.Info("Starting manager", "watchNamespaces", f.watchNamespaces, "tracing", f.tracing)
	err = mgr.Start(ctx)
	if err != nil {
		log.Error(err, "Manager stopped with an error")
	}
	shutdownTracing(traces)
	closeAudit()
	if err != nil {
		os.Exit(1)
	}
}

// startTracing returns the trace provider of --tracing, nil when tracing is off.
func startTracing(ctx context.Context, f flags) (*tracing.Provider, error) {
	if !f.tracing {
		if f.traceContent {
			ctrl.Log.WithName("setup").Info("--trace-content has no effect without --tracing")
		}
		return nil, nil
	}
	return tracing.New(ctx, tracing.Options{Content: f.traceContent})
}

// startAudit returns the audit trail of --audit-log and --audit-otlp (nil when both
// are off) and what closes its sinks.
func startAudit(ctx context.Context, f flags) (*audit.Trail, func(), error) {
	var sinks audit.Sinks
	var closers []func()
	if f.auditLog != "" {
		file, err := audit.OpenJSONLines(f.auditLog)
		if err != nil {
			return nil, nil, err
		}
		sinks = append(sinks, file)
		closers = append(closers, func() { _ = file.Close() })
	}
	if f.auditOTLP {
		otlp, err := audit.NewOTLP(ctx)
		if err != nil {
			return nil, nil, err
		}
		sinks = append(sinks, otlp)
		closers = append(closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = otlp.Shutdown(sctx)
		})
	}
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	if len(sinks) == 0 {
		return nil, closeAll, nil
	}
	return &audit.Trail{Sink: sinks}, closeAll, nil
}

// shutdownTracing exports the spans still queued, for a few seconds at most.
func shutdownTracing(p *tracing.Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Traces not all exported at shutdown")
	}
}

// setup registers the controllers, the webhooks when enabled (and the rotator of
// their certificate when the manager provisions it), and the health checks.
func setup(mgr ctrl.Manager, f flags, shard labels.Selector, traces *tracing.Provider, trail *audit.Trail, certs *servingcert.Provisioner) error {
	if err := controller.Setup(mgr, controller.Options{
		Advance:                 controller.AdvanceMode(f.advance),
		MaxConcurrentReconciles: f.concurrency,
		ShardSelector:           shard,
		Tracing:                 traces,
		Audit:                   trail,
	}); err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	if f.enableWebhooks {
		if err := webhook.SetupWebhooks(mgr, webhook.Options{Checks: controller.AdmissionChecks()}); err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
	}
	if certs != nil {
		if err := certs.Add(mgr); err != nil {
			return err
		}
		// Not ready until the certificate is there and the webhook server serves.
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// Command manager runs the journey-operator controllers.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/webhook"
)

func main() {
	var (
		metricsAddr, probeAddr, advance string
		shardSelector                   string
		leaderElect, secureMetrics      bool
		enableWebhooks                  bool
		concurrency                     int
		qps                             float64
		burst                           int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (:8443 for HTTPS, :8080 for HTTP, 0 to disable).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one manager is active (active/standby).")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&enableWebhooks, "enable-webhooks", true, "Serve the Session admission webhook (stamps and authorizes approvals). Needs serving certificates, e.g. from cert-manager (config/default).")
	flag.IntVar(&concurrency, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "Sessions stepped in parallel; also the most agent calls in flight.")
	flag.StringVar(&advance, "advance", string(controller.AdvanceWatch), "How Running Sessions get their next step: watch or requeue.")
	flag.StringVar(&shardSelector, "shard-selector", "", "Label selector of the Sessions this manager runs, e.g. 'journey.dev/shard=a' (empty: all). Each shard elects its own leader.")
	flag.Float64Var(&qps, "kube-api-qps", 200, "Client queries per second to the API server, per resource type (each step writes one Session status).")
	flag.IntVar(&burst, "kube-api-burst", 400, "Client burst to the API server, per resource type.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flowv1.AddToScheme(scheme))

	shard, err := labels.Parse(shardSelector)
	if err != nil {
		log.Error(err, "Invalid --shard-selector", "selector", shardSelector)
		os.Exit(2)
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       controller.LeaderElectionID(shard),
		Cache:                  controller.CacheOptions(shard),
	})
	if err != nil {
		log.Error(err, "Unable to create manager")
		os.Exit(1)
	}
	if err := controller.Setup(mgr, controller.Options{
		Advance:                 controller.AdvanceMode(advance),
		MaxConcurrentReconciles: concurrency,
		ShardSelector:           shard,
	}); err != nil {
		log.Error(err, "Unable to set up controllers")
		os.Exit(1)
	}
	if enableWebhooks {
		if err := webhook.SetupWebhooks(mgr, webhook.Options{}); err != nil {
			log.Error(err, "Unable to set up webhooks")
			os.Exit(1)
		}
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))

	log.Info("Starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}

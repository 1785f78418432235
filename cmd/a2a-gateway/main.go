// Command a2a-gateway serves every Journey as an agent of the Agent2Agent (A2A)
// protocol at /a2a/<namespace>/<journey>, acting as each caller (internal/a2a).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/journeyops/journey-operator/internal/a2a"
)

func main() {
	var (
		addr, publicURL, namespaces, audiences, certFile, keyFile string
		rate                                                      float64
		burst                                                     int
		maxWait                                                   time.Duration
	)
	flag.StringVar(&addr, "bind-address", ":8080", "Address the gateway serves A2A on.")
	flag.StringVar(&publicURL, "public-url", "", "The gateway's URL as clients reach it, for the agent cards (empty: the scheme and host of each request).")
	flag.StringVar(&namespaces, "namespaces", "", "Comma-separated namespaces whose Journeys are served (empty: every namespace).")
	flag.StringVar(&audiences, "token-audiences", "", "Comma-separated audiences a bearer token must be meant for (empty: the API server's own).")
	flag.Float64Var(&rate, "rate-limit", 5, "Requests per second each caller may make (0: no limit).")
	flag.IntVar(&burst, "rate-burst", 20, "Requests a caller may make at once above --rate-limit.")
	flag.DurationVar(&maxWait, "max-wait", 5*time.Minute, "How long a blocking message/send or tasks/cancel waits for the Session to answer before returning the task as it is.")
	flag.StringVar(&certFile, "tls-cert-file", "", "Serve HTTPS with this certificate (and --tls-key-file); empty: plain HTTP, for a mesh or an ingress that terminates TLS.")
	flag.StringVar(&keyFile, "tls-key-file", "", "The private key of --tls-cert-file.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("a2a-gateway")

	if err := run(addr, certFile, keyFile, a2a.Options{
		Namespaces: split(namespaces), PublicURL: publicURL,
		RatePerSecond: rate, Burst: burst, MaxWait: maxWait, Log: log,
	}, split(audiences)); err != nil {
		log.Error(err, "Gateway failed")
		os.Exit(1)
	}
}

func run(addr, certFile, keyFile string, o a2a.Options, audiences []string) error {
	if (certFile == "") != (keyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	if o, err = a2a.ForConfig(cfg, o, audiences); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(a2a.PathPrefix, a2a.New(o))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		o.Log.Info("Serving A2A", "address", addr, "agents", "/a2a/<namespace>/<journey>")
		if certFile != "" {
			errc <- srv.ListenAndServeTLS(certFile, keyFile)
		} else {
			errc <- srv.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

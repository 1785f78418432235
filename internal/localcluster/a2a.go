package localcluster

import (
	"net"
	"net/http"
	"time"

	"github.com/journeyops/journey-operator/internal/a2a"
)

// GatewayAddress is where `DEMO_KEEP=1 make demo` serves the A2A gateway when it is
// free, and the address docs/a2a.md names.
const GatewayAddress = "127.0.0.1:8767"

// Gateway is the A2A gateway serving a Cluster's journeys.
type Gateway struct {
	// URL is the gateway's base URL: agents are at URL/a2a/<namespace>/<journey>.
	URL string
	srv *http.Server
}

// Close stops the gateway.
func (g *Gateway) Close() error { return g.srv.Close() }

// ServeA2A serves the A2A gateway (cmd/a2a-gateway's) on addr, or on a free loopback
// port when addr is taken and fallback is true. It acts with the control plane's admin
// credentials, as the demo's manager does; callers still authenticate with their own
// bearer tokens and are impersonated.
func (c *Cluster) ServeA2A(addr string, fallback bool) (*Gateway, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && fallback {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, err
	}
	o, err := a2a.ForConfig(c.Env.Config, a2a.Options{MaxWait: time.Minute}, nil)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(a2a.PathPrefix, a2a.New(o))
	g := &Gateway{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

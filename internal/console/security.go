package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// csrfCookie carries the per-process token; forms echo it in the csrfField field.
const (
	csrfCookie = "journey_console_csrf"
	csrfField  = "csrf"
)

func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// allowedHosts are the Host header values of requests addressed to addr: its IP and
// port, and localhost with the port when the IP is a loopback one. Refusing any other
// Host defeats DNS rebinding: a page of another site that makes its name resolve to
// 127.0.0.1 still sends its own name as Host.
func allowedHosts(addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := strconv.Itoa(tcp.Port)
	hosts := []string{net.JoinHostPort(tcp.IP.String(), port)}
	if tcp.IP.IsLoopback() {
		hosts = append(hosts, net.JoinHostPort("localhost", port))
	}
	if tcp.IP.IsUnspecified() {
		// Listening on every address: accept requests to any loopback name.
		hosts = append(hosts, net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("localhost", port), net.JoinHostPort("::1", port))
	}
	return hosts
}

// secure wraps h: it refuses requests addressed to another host, sets headers that keep
// pages from being framed or loading anything from elsewhere, sets the CSRF cookie, and
// checks every request that is not a read for the token and a same-origin Origin.
func (s *Server) secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hosts != nil && !slices.Contains(s.hosts, r.Host) {
			http.Error(w, "unexpected Host header: open the console at the address kubectl journey dashboard printed", http.StatusMisdirectedRequest)
			return
		}
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "same-origin")
		hdr.Set("Cache-Control", "no-store")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			http.SetCookie(w, &http.Cookie{
				Name: csrfCookie, Value: s.csrf, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
			})
		default:
			if reason := s.refuseChange(r); reason != "" {
				http.Error(w, "refused: "+reason, http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// refuseChange says why a state-changing request is refused, or "" when it carries the
// console's token in both the cookie and the form (or X-CSRF-Token header) and, when
// the browser tells, comes from the console's own origin.
func (s *Server) refuseChange(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "cross-site request"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return "request from another origin (" + origin + ")"
		}
	}
	cookie, err := r.Cookie(csrfCookie)
	if err != nil || !sameToken(cookie.Value, s.csrf) {
		return "missing or stale console cookie; reload the page"
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostFormValue(csrfField)
	}
	if !sameToken(token, s.csrf) {
		return "missing or wrong form token; reload the page"
	}
	return ""
}

func sameToken(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

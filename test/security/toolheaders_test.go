package security

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestToolHeaderAppearsNowhere runs the clinic journey against an MCP server that
// refuses every request without the bearer token, with the Authorization header read
// from a Secret (valueFrom.secretKeyRef). The tools are discovered and called, and
// afterwards the token appears in no Session, Journey or Journey revision, no Event of
// the namespace and no line the manager logged.
func TestToolHeaderAppearsNowhere(t *testing.T) {
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	token := "clinic-" + hex.EncodeToString(raw)

	var mu sync.Mutex
	var seen, refused int
	mcp := clinic.New().Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := r.Header.Get("Authorization") == "Bearer "+token
		if ok {
			seen++
		} else {
			refused++
		}
		mu.Unlock()
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcp.ServeHTTP(w, r)
	}))
	defer srv.Close()

	env := controlPlane(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{}) },
	})
	p, j := testenv.ClinicBooking(ns, srv.URL)
	j.Spec.ToolServers[0].Headers = []flowv1.ToolServerHeader{{Name: "Authorization",
		ValueFrom: &flowv1.HeaderValueSource{SecretKeyRef: flowv1.SecretKeyRef{Name: "clinic", Key: "token"}}}}
	env.Create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clinic"}, StringData: map[string]string{"token": "Bearer " + token}},
		p, j,
		&flowv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "booking"}, Spec: flowv1.SessionSpec{
			JourneyRef: flowv1.JourneyReference{Name: "clinic"},
		}},
	)
	waitFor(t, 60*time.Second, func() error {
		var s flowv1.Session
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "booking"}, &s); err != nil {
			return err
		}
		if s.Status.Phase != flowv1.PhaseCompleted || s.Status.LastTurn == nil || !strings.HasPrefix(s.Status.LastTurn.AssistantText, "Booked ") {
			return fmt.Errorf("phase %q, last turn %+v", s.Status.Phase, s.Status.LastTurn)
		}
		return nil
	})
	// The header was really sent: the server refused nothing, and discovery and both
	// calls reached it.
	mu.Lock()
	if refused > 0 || seen < 3 {
		t.Errorf("the server got %d requests with the token and refused %d", seen, refused)
	}
	mu.Unlock()

	var haystack map[string]string
	waitFor(t, 10*time.Second, func() error {
		var err error
		if haystack, err = readable(ctx, c, ns); err != nil {
			return err
		}
		if !strings.Contains(haystack["events.k8s.io events"], flowv1.ReasonCompleted) {
			return fmt.Errorf("no %s event yet", flowv1.ReasonCompleted)
		}
		return nil
	})
	for where, text := range haystack {
		for _, needle := range []string{token, token[len(token)-16:]} {
			if i := strings.Index(text, needle); i >= 0 {
				start, end := max(0, i-120), min(len(text), i+len(needle)+40)
				t.Errorf("the tool server's token appears in %s: ...%s...", where, text[start:end])
				break
			}
		}
	}
}

package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
)

// apply creates the objects of an install except the Deployment (no image runs here)
// and the cert-manager objects (no cert-manager here), CRDs first; CRDs another install
// already created are left as they are (TestChartIsConfig shows they are the same), and
// so are namespaces.
func apply(ctx context.Context, t *testing.T, c client.Client, r *rendered) {
	t.Helper()
	objs := slices.Clone(r.objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolInt(b.GetKind() == "CustomResourceDefinition") - boolInt(a.GetKind() == "CustomResourceDefinition")
	})
	for _, u := range objs {
		if u.GetKind() == "Deployment" || strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/") {
			continue
		}
		if ns := u.GetNamespace(); ns != "" {
			ensureNamespace(ctx, t, c, ns)
		}
		err := c.Create(ctx, u.DeepCopy())
		if apierrors.IsAlreadyExists(err) && (u.GetKind() == "CustomResourceDefinition" || u.GetKind() == "Namespace") {
			continue
		}
		if err != nil {
			t.Fatalf("creating %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		if u.GetKind() == "CustomResourceDefinition" {
			waitEstablished(ctx, t, c, u.GetName())
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ensureNamespace(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		if err := c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cond := range conds {
			m := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}
}

// install is one rendered install and its manager's ServiceAccount.
type install struct {
	name       string
	r          *rendered
	ns         string
	sa         string
	namespaces []string // watched; nil means every namespace
	// selfCert: the manager provisions the webhook certificate in this Secret of ns.
	selfCert string
}

// access is one SubjectAccessReview question.
type access struct {
	group, resource, sub, verb, ns string
}

func (a access) String() string {
	r := a.resource
	if a.sub != "" {
		r += "/" + a.sub
	}
	if a.group != "" {
		r += "." + a.group
	}
	where := "cluster-wide"
	if a.ns != "" {
		where = "in " + a.ns
	}
	return a.verb + " " + r + " " + where
}

func can(ctx context.Context, t *testing.T, cs kubernetes.Interface, in install, a access) bool {
	t.Helper()
	return canNamed(ctx, t, cs, in, a, "")
}

// canNamed asks about the object called name (any object when empty).
func canNamed(ctx context.Context, t *testing.T, cs kubernetes.Interface, in install, a access, name string) bool {
	t.Helper()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + in.ns + ":" + in.sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + in.ns, "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: name,
		},
	}}
	res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	return res.Status.Allowed
}

// needed is what the manager does, from the RBAC markers (config/rbac/role.yaml), in
// namespace ns; and the verbs of the same resources it never uses.
func needed(t *testing.T, ns string) (uses, never []access) {
	role := fromFile(t, "config/rbac/role.yaml").objs[0]
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	for _, r := range role.Object["rules"].([]any) {
		rule := r.(map[string]any)
		verbs := strs(rule["verbs"])
		for _, g := range strs(rule["apiGroups"]) {
			for _, res := range strs(rule["resources"]) {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range all {
					a := access{g, resource, sub, v, ns}
					if slices.Contains(verbs, v) {
						uses = append(uses, a)
					} else {
						never = append(never, a)
					}
				}
			}
		}
	}
	return uses, never
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// checkAccess asks the API server what each install's ServiceAccount may do: all the
// manager uses where it runs Sessions, no other verb on those resources, nothing
// unrelated, and in scoped mode nothing at all outside the watched namespaces.
func checkAccess(ctx context.Context, t *testing.T, cs kubernetes.Interface, in install) {
	where := in.namespaces
	if where == nil {
		where = []string{"", "team-a"} // cluster-wide lists and watches, and any namespace
	}
	for _, ns := range where {
		uses, never := needed(t, ns)
		for _, a := range uses {
			// A Role cannot grant a cluster-wide request; in scoped mode ns is never "".
			if !can(ctx, t, cs, in, a) {
				t.Errorf("%s: the manager cannot %s", in.name, a)
			}
		}
		for _, a := range never {
			if can(ctx, t, cs, in, a) {
				t.Errorf("%s: the manager may %s, which it never does", in.name, a)
			}
		}
	}
	for _, a := range []access{
		{"coordination.k8s.io", "leases", "", "get", in.ns}, {"coordination.k8s.io", "leases", "", "update", in.ns},
		{"coordination.k8s.io", "leases", "", "create", in.ns}, {"", "events", "", "create", in.ns},
		{"authentication.k8s.io", "tokenreviews", "", "create", ""}, {"authorization.k8s.io", "subjectaccessreviews", "", "create", ""},
	} {
		if !can(ctx, t, cs, in, a) {
			t.Errorf("%s: the manager cannot %s (leader election, metrics authentication)", in.name, a)
		}
	}
	for _, a := range []access{
		{"", "secrets", "", "list", ""}, {"", "secrets", "", "watch", "team-a"}, {"", "configmaps", "", "get", "team-a"},
		{"", "pods", "", "list", ""}, {"apps", "deployments", "", "create", "team-a"}, {"", "namespaces", "", "list", ""},
		{"rbac.authorization.k8s.io", "rolebindings", "", "create", "team-a"}, {"coordination.k8s.io", "leases", "", "get", "team-a"},
	} {
		if can(ctx, t, cs, in, a) {
			t.Errorf("%s: the manager may %s", in.name, a)
		}
	}
	checkCertAccess(ctx, t, cs, in)
	if in.namespaces == nil {
		return
	}
	for _, ns := range []string{"", "outside"} {
		uses, _ := needed(t, ns)
		for _, a := range uses {
			if can(ctx, t, cs, in, a) {
				t.Errorf("%s: watching %v, the manager may still %s", in.name, in.namespaces, a)
			}
		}
	}
}

// checkWebhookService: the webhook configurations stored in the API server call a
// Service that exists, in the manager's namespace, on port 443.
func checkWebhookService(ctx context.Context, t *testing.T, c client.Client, in install) {
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		wc := in.r.ofKind(kind)[0]
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(wc.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKey{Name: wc.GetName()}, stored); err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		hooks, _, _ := unstructured.NestedSlice(stored.Object, "webhooks")
		for _, h := range hooks {
			ref := h.(map[string]any)["clientConfig"].(map[string]any)["service"].(map[string]any)
			var svc corev1.Service
			if err := c.Get(ctx, client.ObjectKey{Namespace: fmt.Sprint(ref["namespace"]), Name: fmt.Sprint(ref["name"])}, &svc); err != nil {
				t.Errorf("%s %s: the webhook's Service: %v", in.name, kind, err)
				continue
			}
			if svc.Namespace != in.ns || svc.Spec.Ports[0].Port != 443 || toInt(ref["port"]) != 443 {
				t.Errorf("%s %s: webhook calls %s/%s:%v", in.name, kind, svc.Namespace, svc.Name, ref["port"])
			}
		}
	}
}

// TestInstallsOnAControlPlane applies the chart (cluster-wide and namespace-scoped) and
// config/default to a real API server, then checks what each manager ServiceAccount may
// do, that the webhooks call the installed Service, and that with the webhook server
// down only approvals wait on it; then that the API server accepts the example Budgets
// (checkDefaultBudgetExamples).
func TestInstallsOnAControlPlane(t *testing.T) {
	t.Parallel() // on a control plane of its own, beside the overlays'
	// No CRDs: the installs bring them.
	env := testenv.New(t, testenv.WithoutCRDs())
	ctx := t.Context()
	c := env.Client
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range append([]string{"outside"}, watched...) {
		ensureNamespace(ctx, t, c, ns)
	}
	installs := []install{
		{"chart", renderChart(t, clusterRelease, clusterNS, nil), clusterNS, "jo-journey-operator-controller-manager", nil, ""},
		{"scoped chart", renderChart(t, scopedRelease, scopedNS, scopedValues()), scopedNS, "scoped-journey-operator-controller-manager", watched, ""},
		{"config/default", renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "default")), kustomizeNS, "journey-operator-controller-manager", nil, ""},
		{"self cert chart", renderChart(t, selfRelease, selfNS, selfValues()), selfNS, "self-journey-operator-controller-manager",
			[]string{selfWatched}, "self-journey-operator-webhook-server-cert"},
	}
	ensureNamespace(ctx, t, c, selfWatched)
	for _, in := range installs {
		apply(ctx, t, c, in.r)
		dep := in.r.ofKind("Deployment")[0]
		if got, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName"); got != in.sa {
			t.Fatalf("%s: the manager runs as %q, want %q", in.name, got, in.sa)
		}
	}
	for _, in := range installs {
		t.Run(in.name, func(t *testing.T) {
			checkAccess(ctx, t, cs, in)
			checkWebhookService(ctx, t, c, in)
		})
	}
	bin := buildManager(t)
	t.Run("webhook down", func(t *testing.T) { checkOnlyApprovalsWait(ctx, t, c) })
	t.Run("scoped manager", func(t *testing.T) { runScopedManager(ctx, t, env, c, installs[1], bin) })
	t.Run("self cert manager", func(t *testing.T) { runSelfCertManager(ctx, t, env, c, installs[3], bin) })
	t.Run("default budget examples", func(t *testing.T) { checkDefaultBudgetExamples(ctx, t, c) })
}

// checkOnlyApprovalsWait: no webhook server runs, so every call to it fails and
// failurePolicy Fail refuses the request. The webhooks' matchConditions keep creates,
// messages and outcomes away from them; only an approval is refused.
func checkOnlyApprovalsWait(ctx context.Context, t *testing.T, c client.Client) {
	s := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "down", Namespace: "team-a"},
		Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "absent"}},
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatalf("creating a Session with the webhook down: %v", err)
	}
	s.Spec.Messages = append(s.Spec.Messages, flowv1.Message{ID: "m1", Text: "hello"})
	if err := c.Update(ctx, s); err != nil {
		t.Fatalf("sending a message with the webhook down: %v", err)
	}
	s.Spec.Outcomes = append(s.Spec.Outcomes, flowv1.ExternalOutcome{Pathway: "only", Iteration: 1, ResultType: flowv1.ResultType("success")})
	if err := c.Update(ctx, s); err != nil {
		t.Fatalf("posting an outcome with the webhook down: %v", err)
	}
	s.Spec.Approvals = append(s.Spec.Approvals, flowv1.Approval{DecisionID: "d1", Approve: ptr.To(true)})
	err := c.Update(ctx, s)
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("an approval with the webhook down: want the webhook call to fail closed, got %v", err)
	}
	withApproval := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Name: "down-approved", Namespace: "team-a"},
		Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "absent"},
			Approvals: []flowv1.Approval{{DecisionID: "d1", Approve: ptr.To(true)}}},
	}
	if err := c.Create(ctx, withApproval); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("creating a Session with an approval, webhook down: want refused, got %v", err)
	}
}

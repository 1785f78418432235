package webhook_test

// These tests run the webhooks the way a cluster does: a real kube-apiserver with the
// generated webhook configurations of config/webhook calls a real webhook server
// (a manager with SetupWebhooks), and users authenticated by the API server, bound to
// the ClusterRoles of config/rbac, send approvals with their own credentials.
// No Session controller runs: the tests write status.lastDecision themselves.
// The tests run in parallel (but one with a one-second idle timeout): each works on
// Sessions of its own (generated names in the shared namespace, or a namespace of its
// own with a manager restricted to it).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/webhook"
)

const ns = "approvals"

var (
	// admin is the control plane's admin; it writes status and fixtures.
	admin client.Client
	// users by name: alice and bob are journey editors, carol and dave journey
	// approvers, dave through the group release-managers.
	users = map[string]client.Client{}
	// testEnv is the control plane, for tests that run the controllers too.
	testEnv *testenv.Environment
	// now is the webhook's clock.
	now = time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
)

func TestMain(m *testing.M) {
	testenv.Main(m, setup, testenv.WithWebhooks())
}

func setup(env *testenv.Environment) error {
	testEnv = env
	mgr, err := env.RunManager(testenv.ManagerOptions{
		Webhooks: true,
		Setup: func(mgr ctrl.Manager) error {
			return webhook.SetupWebhooks(mgr, webhook.Options{Clock: clocktesting.NewFakePassiveClock(now), Checks: controller.AdmissionChecks()})
		},
	})
	if err != nil {
		return err
	}
	if err := mgr.WaitForWebhooks(10 * time.Second); err != nil {
		return err
	}
	ctx := context.Background()
	admin = env.Client
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	roles := map[string]string{}
	for _, file := range []string{"journey_editor_role.yaml", "journey_approver_role.yaml"} {
		var role rbacv1.ClusterRole
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(raw, &role); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := admin.Create(ctx, &role); err != nil {
			return err
		}
		roles[file] = role.Name
	}
	for _, u := range []struct {
		name, role string
		groups     []string
	}{
		{"alice", "journey_editor_role.yaml", nil},
		{"bob", "journey_editor_role.yaml", nil},
		{"carol", "journey_approver_role.yaml", nil},
		{"dave", "", []string{"release-managers"}},
	} {
		if users[u.name], err = env.UserClient(envtest.User{Name: u.name, Groups: u.groups}); err != nil {
			return err
		}
		subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u.name}
		role := roles[u.role]
		if u.role == "" {
			subject = rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: u.groups[0]}
			role = roles["journey_approver_role.yaml"]
		}
		if err := admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: u.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{subject},
		}); err != nil {
			return err
		}
	}
	return createJourney(ctx)
}

// createJourney creates the journey "release": draft -> review -> publish. review's
// partial_success decision lists approvers (carol and the group release-managers);
// draft's unclear decision lists none. draft is External (it takes outcomes), the
// others run on agents.
func createJourney(ctx context.Context) error {
	pathways := []*flowv1.Pathway{
		{ObjectMeta: metav1.ObjectMeta{Name: "draft"}, Spec: flowv1.PathwaySpec{
			Executor: flowv1.ExecutorExternal,
			Next:     "review",
			Transitions: &flowv1.OutcomeTransitions{OnUnclear: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
				AllowedDestinations: []flowv1.Name{"draft", "review"},
			}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "review"}, Spec: flowv1.PathwaySpec{
			Next: "publish",
			Transitions: &flowv1.OutcomeTransitions{OnPartialSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{
				AllowedDestinations: []flowv1.Name{"draft", "publish"},
				Approvers:           &flowv1.Approvers{Users: []string{"carol"}, Groups: []string{"release-managers"}},
			}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "publish"}},
	}
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "release"}, Spec: flowv1.JourneySpec{EntryPathway: "draft"}}
	for _, p := range pathways {
		p.Namespace = ns
		if err := admin.Create(ctx, p); err != nil {
			return err
		}
		j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: flowv1.Name(p.Name), PathwayRef: p.Name})
	}
	return admin.Create(ctx, j)
}

// newSession creates a Session as alice and, as the controller would, records a
// decision waiting for approval in its status.
func newSession(t *testing.T, d *flowv1.DecisionRecord) *flowv1.Session {
	t.Helper()
	ctx := context.Background()
	s := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "s-"},
		Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "release"}},
	}
	if err := users["alice"].Create(ctx, s); err != nil {
		t.Fatalf("alice creating a Session: %v", err)
	}
	if d != nil {
		s.Status.Phase = flowv1.PhaseAwaitingApproval
		s.Status.LastDecision = d
		if err := admin.Status().Update(ctx, s); err != nil {
			t.Fatalf("writing status: %v", err)
		}
	}
	return s
}

// draftDecision is a pending decision without approvers.
func draftDecision() *flowv1.DecisionRecord {
	return &flowv1.DecisionRecord{
		ID: "d-3", From: "draft", To: "review", Transition: "onUnclear", Source: flowv1.SourceAgent,
		Confidence: "0.7", AllowedDestinations: []string{"draft", "review"}, State: flowv1.DecisionPending,
	}
}

// reviewDecision is a pending decision whose approvers are carol and release-managers.
func reviewDecision() *flowv1.DecisionRecord {
	return &flowv1.DecisionRecord{
		ID: "d-9", From: "review", To: "publish", Transition: "onPartialSuccess", Source: flowv1.SourceAgent,
		Confidence: "0.7", AllowedDestinations: []string{"draft", "publish"}, State: flowv1.DecisionPending,
	}
}

// approve appends a to the Session's approvals as user, the way kubectl journey
// approve does (get, append, update), and returns the stored Session.
func approve(user string, s *flowv1.Session, a flowv1.Approval) (*flowv1.Session, error) {
	ctx := context.Background()
	c := users[user]
	var cur flowv1.Session
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		return nil, err
	}
	cur.Spec.Approvals = append(cur.Spec.Approvals, a)
	if err := c.Update(ctx, &cur); err != nil {
		return nil, err
	}
	return &cur, nil
}

// wantDenied checks that err is the API server relaying a webhook's denial (or a
// schema rule's) with a message containing every part of want.
func wantDenied(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the request was allowed; want it denied with %q", want)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("got error %v (reason %s); want Forbidden or Invalid", err, apierrors.ReasonForError(err))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err.Error(), w)
		}
	}
}

func TestApprovalIsStampedWithTheAuthenticatedUser(t *testing.T) {
	t.Parallel()
	s := newSession(t, draftDecision())
	got, err := approve("alice", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true), Reason: "looks right"})
	if err != nil {
		t.Fatalf("alice approving: %v", err)
	}
	a := got.Spec.Approvals[0]
	if a.By != "alice" {
		t.Errorf("by = %q, want alice", a.By)
	}
	if a.At == nil || !a.At.Time.Equal(now) {
		t.Errorf("at = %v, want the webhook's clock %v", a.At, now)
	}
	if a.DecisionID != "d-3" || !a.Approves() || a.Reason != "looks right" {
		t.Errorf("the approval was changed beyond by and at: %+v", a)
	}

	// A client-chosen time is replaced by the webhook's.
	s = newSession(t, draftDecision())
	past := metav1.NewTime(now.Add(-48 * time.Hour))
	got, err = approve("bob", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true), By: "bob", At: &past})
	if err != nil {
		t.Fatalf("bob approving as himself: %v", err)
	}
	if a := got.Spec.Approvals[0]; a.By != "bob" || !a.At.Time.Equal(now) {
		t.Errorf("approval = by %q at %v, want by bob at %v", a.By, a.At, now)
	}
}

func TestForgedApprovalIsRejected(t *testing.T) {
	t.Parallel()
	s := newSession(t, draftDecision())
	_, err := approve("alice", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true), By: "bob"})
	wantDenied(t, err, "spec.approvals[0].by", `approval forged: by is "bob" but the request was made by "alice"`)

	var cur flowv1.Session
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	if len(cur.Spec.Approvals) != 0 {
		t.Errorf("the forged approval was stored: %+v", cur.Spec.Approvals)
	}

	// A JSON patch that forges by is refused the same way.
	patch := []byte(`[{"op":"add","path":"/spec/approvals","value":[{"decisionID":"d-3","approve":true,"by":"carol"}]}]`)
	err = users["alice"].Patch(context.Background(), &cur, client.RawPatch("application/json-patch+json", patch))
	wantDenied(t, err, "approval forged")
}

func TestApproversRestrictWhoMayAnswer(t *testing.T) {
	t.Parallel()
	s := newSession(t, reviewDecision())

	// alice may patch the Session (journey-editor), but the decision's approvers do not list her.
	_, err := approve("alice", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true)})
	wantDenied(t, err, `user "alice" may not answer decision d-9`, "users carol and groups release-managers")
	// Nor may she reject it.
	_, err = approve("alice", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(false)})
	wantDenied(t, err, `user "alice" may not answer decision d-9`)

	// carol is listed by name (and holds only journey-approver).
	got, err := approve("carol", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true), Destination: "draft"})
	if err != nil {
		t.Fatalf("carol approving: %v", err)
	}
	if a := got.Spec.Approvals[0]; a.By != "carol" || a.Destination != "draft" {
		t.Errorf("approval = %+v, want by carol to draft", a)
	}

	// dave is in the group release-managers.
	s = newSession(t, reviewDecision())
	if _, err := approve("dave", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true)}); err != nil {
		t.Fatalf("dave (group release-managers) approving: %v", err)
	}

	// Without approvers on the decision, any user who may patch the Session may answer.
	s = newSession(t, draftDecision())
	if _, err := approve("carol", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true)}); err != nil {
		t.Fatalf("carol approving a decision without approvers: %v", err)
	}
}

func TestApproversComeFromThePinnedRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The revision the Session runs on lists only alice as approver of review's decision,
	// while the live Pathway lists carol and release-managers.
	review := flowv1.PathwaySpec{Transitions: &flowv1.OutcomeTransitions{OnPartialSuccess: &flowv1.OutcomeTransition{
		Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"draft", "publish"}, Approvers: &flowv1.Approvers{Users: []string{"alice"}}},
	}}}
	// The controller's own revision format, so the two cannot drift apart.
	raw, err := json.Marshal(revision.Data{
		Journey:  flowv1.JourneySpec{EntryPathway: "review", Pathways: []flowv1.PathwayEntry{{Name: "review", PathwayRef: "review"}}},
		Pathways: map[string]*flowv1.PathwaySpec{"review": &review},
	})
	if err != nil {
		t.Fatal(err)
	}
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "release-0123456789"},
		Data: runtime.RawExtension{Raw: raw}, Revision: 1}
	if err := admin.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, nil)
	s.Status.JourneyRevision = rev.Name
	s.Status.Phase = flowv1.PhaseAwaitingApproval
	s.Status.LastDecision = reviewDecision()
	if err := admin.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}

	_, err = approve("carol", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true)})
	wantDenied(t, err, `user "carol" may not answer decision d-9: its approvers are users alice`)
	if _, err := approve("alice", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true)}); err != nil {
		t.Fatalf("alice, the revision's approver, approving: %v", err)
	}

	// A Session pinned to a revision that is gone cannot be approved: the webhook fails closed.
	s = newSession(t, nil)
	s.Status.JourneyRevision = "release-gone"
	s.Status.LastDecision = reviewDecision()
	if err := admin.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	_, err = approve("carol", s, flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true)})
	wantDenied(t, err, "cannot check who may approve decision d-9", "release-gone")
}

func TestSentApprovalsCannotChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSession(t, draftDecision())
	got, err := approve("alice", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true)})
	if err != nil {
		t.Fatal(err)
	}

	edited := got.DeepCopy()
	edited.Spec.Approvals[0].Approve = ptr.To(false)
	wantDenied(t, users["alice"].Update(ctx, edited), "spec.approvals", "append-only")

	resigned := got.DeepCopy()
	resigned.Spec.Approvals[0].By = "bob"
	wantDenied(t, users["bob"].Update(ctx, resigned), "spec.approvals", "append-only")

	removed := got.DeepCopy()
	removed.Spec.Approvals = []flowv1.Approval{}
	wantDenied(t, users["alice"].Update(ctx, removed), "spec.approvals", "append-only")

	var cur flowv1.Session
	if err := admin.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	if a := cur.Spec.Approvals; len(a) != 1 || !a[0].Approves() || a[0].By != "alice" {
		t.Errorf("stored approvals changed: %+v", a)
	}
}

func TestApprovalsMustAnswerThePendingDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	s := newSession(t, draftDecision())
	_, err := approve("alice", s, flowv1.Approval{DecisionID: "d-4", Approve: ptr.To(true)})
	wantDenied(t, err, `decision "d-4" is not pending`, "waits on decision d-3")

	_, err = approve("alice", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true), Destination: "publish"})
	wantDenied(t, err, "spec.approvals[0].destination", `"publish"`, `"draft", "review"`)

	if _, err := approve("alice", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	_, err = approve("bob", s, flowv1.Approval{DecisionID: "d-3", Approve: ptr.To(false)})
	// Approvals are keyed by decisionID: the API server refuses a second answer to the
	// same decision before the webhook sees it.
	wantDenied(t, err, "spec.approvals[1]", "Duplicate value", `"decisionID":"d-3"`)

	// Nothing pending yet: an approval cannot be sent ahead of its decision, on
	// create or on update.
	s = newSession(t, nil)
	_, err = approve("alice", s, flowv1.Approval{DecisionID: "d-1", Approve: ptr.To(true)})
	wantDenied(t, err, "has no decision waiting for approval")
	pre := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "s-"},
		Spec: flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "release"},
			Approvals: []flowv1.Approval{{DecisionID: "d-1", Approve: ptr.To(true)}}},
	}
	wantDenied(t, users["alice"].Create(ctx, pre), "has no decision waiting for approval")

	// Other spec changes do not involve approvals and pass.
	var cur flowv1.Session
	if err := users["alice"].Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Messages = append(cur.Spec.Messages, flowv1.Message{ID: "m1", Text: "hello"})
	if err := users["alice"].Update(ctx, &cur); err != nil {
		t.Fatalf("appending a message: %v", err)
	}
}

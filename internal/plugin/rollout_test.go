package plugin

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// rollout status shows the canary and its counts; promote and abort annotate the
// Journey with the canary revision they are about; without a canary they are refused.
func TestRolloutCommands(t *testing.T) {
	j := &flowv1alpha1.Journey{
		ObjectMeta: metav1.ObjectMeta{Name: "care", Namespace: "default"},
		Spec: flowv1alpha1.JourneySpec{Rollout: &flowv1alpha1.Rollout{
			Canary: flowv1alpha1.CanaryStrategy{Steps: []flowv1alpha1.CanaryStep{{Weight: 25}, {Weight: 50}}}}},
		Status: flowv1alpha1.JourneyStatus{
			ReadyRevision: "care-2", StableRevision: "care-1", CanaryRevision: "care-2",
			Rollout: &flowv1alpha1.RolloutStatus{Revision: "care-2", Phase: flowv1alpha1.RolloutPaused, Step: 0, Weight: 25,
				Message: "step 1 of 2 (25%) holds until kubectl journey rollout promote",
				Counts: flowv1alpha1.RolloutCounts{
					Stable: flowv1alpha1.RevisionCounts{Started: 30, Finished: 28, Completed: 27, Failed: 1, Turns: 90},
					Canary: flowv1alpha1.RevisionCounts{Started: 10, Finished: 9, Completed: 6, Failed: 3, Turns: 31, CostUSD: "0.120000"}}},
		},
	}
	c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(j).Build()
	run := func(args ...string) (string, error) {
		var out strings.Builder
		o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		o.NewClient = func() (client.WithWatch, error) { return c, nil }
		cmd := NewCommandWithOptions(o)
		cmd.SetArgs(append(args, "-n", "default"))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("rollout", "status", "care")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Stable:   care-1", "Canary:   care-2", "Phase:    Paused (revision care-2)", "Step:     1 of 2, weight 25%",
		"canary care-2  10       9         6          3       0          31     0.120000"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if out, err := run("rollout", "promote", "journey/care"); err != nil || out != "journey/care: promote of canary care-2 requested\n" {
		t.Fatalf("promote: %v %s", err, out)
	}
	if _, err := run("rollout", "abort", "care"); err != nil {
		t.Fatal(err)
	}
	got := &flowv1alpha1.Journey{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(j), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[flowv1alpha1.AnnotationRolloutPromote] != "care-2" || got.Annotations[flowv1alpha1.AnnotationRolloutAbort] != "care-2" {
		t.Errorf("annotations %v", got.Annotations)
	}

	got.Status.CanaryRevision = ""
	got.Status.Rollout.Phase = flowv1alpha1.RolloutPromoted
	if err := c.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if _, err := run("rollout", "abort", "care"); err == nil || !strings.Contains(err.Error(), `journey "care" has no canary to abort`) {
		t.Fatalf("abort without a canary: %v", err)
	}
}

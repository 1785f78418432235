package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// kubectl journey budget: each Budget's spend against its limits, and for one Budget
// each shard's lease and what each journey and Session spent in its current window
// (an older window's entries are not counted).
func TestBudgetOnCluster(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	start := metav1.NewTime(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	b := &flowv1alpha1.Budget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "care-daily"},
		Spec: flowv1alpha1.BudgetSpec{Window: "Day", Limits: flowv1alpha1.BudgetLimits{CostUSD: "0.05", ModelCalls: 100}}}
	if err := admin.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	base := b.DeepCopy()
	renewed := metav1.NewMicroTime(start.Add(10 * time.Hour))
	shard := func(name, granted, spent string, calls int64, window metav1.Time) flowv1alpha1.BudgetShard {
		return flowv1alpha1.BudgetShard{Shard: name, WindowStart: window, RenewTime: renewed, LeaseSeconds: 60, Sessions: 1,
			Granted: flowv1alpha1.BudgetAmounts{CostUSD: granted, ModelCalls: ptr.To[int64](50)},
			Spent:   flowv1alpha1.BudgetAmounts{CostUSD: spent, ModelCalls: ptr.To(calls), Tokens: ptr.To[int64](100)}}
	}
	b.Status = flowv1alpha1.BudgetStatus{WindowStart: &start, Sessions: 2, Waiting: 1,
		Spent: flowv1alpha1.BudgetAmounts{CostUSD: "0.0045", ModelCalls: ptr.To[int64](3)},
		Shards: []flowv1alpha1.BudgetShard{shard("journey.dev/shard=a", "0.03", "0.003", 2, start), shard("journey.dev/shard=b", "0.02", "0.0015", 1, start),
			shard("journey.dev/shard=c", "0.05", "1", 9, metav1.NewTime(start.Add(-24*time.Hour)))}}
	b.Status.Shards[1].Waiting = 1
	if err := admin.Status().Patch(ctx, b, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	newSession(t, "budget-a")
	newSession(t, "budget-b")
	setStatus(t, "budget-a", func(st *flowv1alpha1.SessionStatus) {
		st.Budgets = []flowv1alpha1.BudgetCharge{{Name: "care-daily", WindowStart: start, CostUSD: "0.003", Tokens: 300, ModelCalls: 2}}
	})
	setStatus(t, "budget-b", func(st *flowv1alpha1.SessionStatus) {
		st.Budgets = []flowv1alpha1.BudgetCharge{{Name: "care-daily", WindowStart: start, CostUSD: "0.0015", Tokens: 150, ModelCalls: 1},
			{Name: "other", WindowStart: start, CostUSD: "9"}}
	})
	out, _, err := kubectlJourney(ctx, "budget", "care-daily")
	if err != nil {
		t.Fatal(err)
	}
	want := `BUDGET       WINDOW   COST (USD)    TOKENS   MODEL CALLS   TOOL CALLS   SESSIONS   WAITING
care-daily   Day      0.0045/0.05   0        3/100         0            2          1

SHARD                 SPENT                       RESERVED               GRANTED                    SESSIONS   WAITING   RENEWED
journey.dev/shard=a   USD 0.003, 2 model calls    USD 0, 0 model calls   USD 0.03, 50 model calls   1          0         2026-11-26T10:00:00Z
journey.dev/shard=b   USD 0.0015, 1 model calls   USD 0, 0 model calls   USD 0.02, 50 model calls   1          1         2026-11-26T10:00:00Z

JOURNEY    SESSION    COST (USD)   TOKENS   MODEL CALLS   TOOL CALLS
referral   budget-a   0.003        300      2             0
referral   budget-b   0.0015       150      1             0
`
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	if _, _, err := kubectlJourney(ctx, "budget", "nope"); err == nil || !strings.Contains(err.Error(), `getting budget "nope" in namespace "default"`) {
		t.Errorf("unknown budget: %v", err)
	}
}

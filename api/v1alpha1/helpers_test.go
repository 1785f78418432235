package v1alpha1

import (
	"slices"
	"testing"
)

func TestPendingDecision(t *testing.T) {
	for state, want := range map[DecisionState]bool{
		DecisionPending: true, DecisionEscalated: true,
		DecisionApplied: false, DecisionApproved: false, DecisionRejected: false, "": false,
	} {
		st := &SessionStatus{LastDecision: &DecisionRecord{ID: "d-1", State: state}}
		if got := st.PendingDecision() != nil; got != want {
			t.Errorf("state %q: pending = %v, want %v", state, got, want)
		}
	}
	if (&SessionStatus{}).PendingDecision() != nil {
		t.Error("a Session without a decision has a pending decision")
	}
	if (&SessionStatus{LastDecision: &DecisionRecord{State: DecisionPending}}).PendingDecision() != nil {
		t.Error("a decision without an id is pending")
	}
}

func TestOutcomeTransitions(t *testing.T) {
	success := &OutcomeTransition{To: "next"}
	partial := &OutcomeTransition{Decision: &Decision{}}
	unclear := &OutcomeTransition{Decision: &Decision{}}
	failure := &OutcomeTransition{To: "retry"}
	all := &OutcomeTransitions{OnUnclear: unclear, OnPartialSuccess: partial, OnFailure: failure, OnSuccess: success}

	var names []string
	for name, tr := range all.All() {
		names = append(names, name)
		if all.Named(name) != tr {
			t.Errorf("Named(%s) is not the transition All yields", name)
		}
	}
	if want := []string{"onSuccess", "onFailure", "onPartialSuccess", "onUnclear"}; !slices.Equal(names, want) {
		t.Errorf("All yields %v, want %v", names, want)
	}
	if all.Named("onSomethingElse") != nil {
		t.Error("Named finds a transition that does not exist")
	}
	var none *OutcomeTransitions
	for name := range none.All() {
		t.Errorf("a nil OutcomeTransitions yields %s", name)
	}
	if none.Named(TransitionOnSuccess) != nil {
		t.Error("a nil OutcomeTransitions has onSuccess")
	}

	tests := []struct {
		tr       *OutcomeTransitions
		rt       ResultType
		want     *OutcomeTransition
		wantName string
	}{
		{all, ResultSuccess, success, "onSuccess"},
		{all, ResultFailure, failure, "onFailure"},
		{all, ResultPartialSuccess, partial, "onPartialSuccess"},
		{all, ResultUnclear, unclear, "onUnclear"},
		// A partial success without onPartialSuccess takes onSuccess.
		{&OutcomeTransitions{OnSuccess: success}, ResultPartialSuccess, success, "onSuccess"},
		{&OutcomeTransitions{OnSuccess: success}, ResultFailure, nil, "onFailure"},
		{all, "other", nil, ""},
		{nil, ResultSuccess, nil, ""},
	}
	for _, tt := range tests {
		got, name := tt.tr.ForResult(tt.rt)
		if got != tt.want || name != tt.wantName {
			t.Errorf("ForResult(%q) = %v %q, want %v %q", tt.rt, got, name, tt.want, tt.wantName)
		}
	}
}

func TestPathwayPredicates(t *testing.T) {
	tests := []struct {
		name             string
		p                *PathwaySpec
		detour, external bool
	}{
		{"nil", nil, false, false},
		{"plain", &PathwaySpec{}, false, false},
		{"detour by default type", &PathwaySpec{ReturnBehavior: &ReturnBehavior{}}, true, false},
		{"detour", &PathwaySpec{ReturnBehavior: &ReturnBehavior{Type: ReturnToPrevious}}, true, false},
		{"no return", &PathwaySpec{ReturnBehavior: &ReturnBehavior{Type: ReturnNone}}, false, false},
		{"external", &PathwaySpec{Executor: ExecutorExternal}, false, true},
		{"agent", &PathwaySpec{Executor: ExecutorAgent}, false, false},
	}
	for _, tt := range tests {
		if got := tt.p.IsDetour(); got != tt.detour {
			t.Errorf("%s: IsDetour = %v", tt.name, got)
		}
		if got := tt.p.IsExternal(); got != tt.external {
			t.Errorf("%s: IsExternal = %v", tt.name, got)
		}
	}
}

func TestGlobalTransitionAppliesIn(t *testing.T) {
	for _, tt := range []struct {
		from, pathway string
		any, applies  bool
	}{
		{"", "booking", true, true},
		{"*", "booking", true, true},
		{"booking", "booking", false, true},
		{"intake", "booking", false, false},
	} {
		g := &GlobalTransition{From: tt.from}
		if g.FromAny() != tt.any || g.AppliesIn(tt.pathway) != tt.applies {
			t.Errorf("from %q in %s: FromAny %v AppliesIn %v", tt.from, tt.pathway, g.FromAny(), g.AppliesIn(tt.pathway))
		}
	}
}

func TestPhasePredicates(t *testing.T) {
	for _, tt := range []struct {
		phase                 Phase
		started, awaitsApprov bool
	}{
		{"", false, false},
		{PhasePending, false, false},
		{PhaseRunning, true, false},
		{PhaseWaitingForInput, true, false},
		{PhaseAwaitingApproval, true, true},
		{PhaseEscalated, true, true},
		{PhaseCompleted, true, false},
	} {
		if tt.phase.HasStarted() != tt.started || tt.phase.AwaitsApproval() != tt.awaitsApprov {
			t.Errorf("phase %q: HasStarted %v AwaitsApproval %v", tt.phase, tt.phase.HasStarted(), tt.phase.AwaitsApproval())
		}
	}
}

func TestApprovalIndex(t *testing.T) {
	s := &SessionSpec{Approvals: []Approval{{DecisionID: "d-1"}, {DecisionID: "d-2"}, {DecisionID: "d-2"}}}
	if got := s.ApprovalIndex("d-2"); got != 1 {
		t.Errorf("ApprovalIndex(d-2) = %d, want the first answer, 1", got)
	}
	if got := s.ApprovalIndex("d-3"); got != -1 {
		t.Errorf("ApprovalIndex(d-3) = %d, want -1", got)
	}
}

// upgradePolicy ReplayCompatible moves running Sessions to the revision that serves
// (stable under a rollout), never those of a running canary; Pinned moves none.
func TestUpgradeTarget(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy UpgradePolicy
		status JourneyStatus
		rev    string
		want   string
	}{
		{"pinned", UpgradePinned, JourneyStatus{ReadyRevision: "j-2"}, "j-1", ""},
		{"default is pinned", "", JourneyStatus{ReadyRevision: "j-2"}, "j-1", ""},
		{"older revision", UpgradeReplayCompatible, JourneyStatus{ReadyRevision: "j-2"}, "j-1", "j-2"},
		{"on the ready revision", UpgradeReplayCompatible, JourneyStatus{ReadyRevision: "j-2"}, "j-2", ""},
		{"not pinned yet", UpgradeReplayCompatible, JourneyStatus{ReadyRevision: "j-2"}, "", ""},
		{"no ready revision", UpgradeReplayCompatible, JourneyStatus{}, "j-1", ""},
		{"older than stable during a canary", UpgradeReplayCompatible,
			JourneyStatus{ReadyRevision: "j-3", StableRevision: "j-2", CanaryRevision: "j-3"}, "j-1", "j-2"},
		{"on a running canary", UpgradeReplayCompatible,
			JourneyStatus{ReadyRevision: "j-3", StableRevision: "j-2", CanaryRevision: "j-3"}, "j-3", ""},
		{"on stable during a canary", UpgradeReplayCompatible,
			JourneyStatus{ReadyRevision: "j-3", StableRevision: "j-2", CanaryRevision: "j-3"}, "j-2", ""},
		{"on an aborted canary", UpgradeReplayCompatible,
			JourneyStatus{ReadyRevision: "j-3", StableRevision: "j-2", Rollout: &RolloutStatus{Revision: "j-3", Phase: RolloutAborted}}, "j-3", "j-2"},
		{"on the old stable after a promotion", UpgradeReplayCompatible,
			JourneyStatus{ReadyRevision: "j-3", StableRevision: "j-3"}, "j-2", "j-3"},
	} {
		j := &Journey{Spec: JourneySpec{UpgradePolicy: c.policy}, Status: c.status}
		if got := j.UpgradeTarget(c.rev); got != c.want {
			t.Errorf("%s: UpgradeTarget(%q) = %q, want %q", c.name, c.rev, got, c.want)
		}
	}
}

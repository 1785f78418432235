package webhook

import (
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// wantErrs checks that errs has one error per expected substring, in order.
func wantErrs(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors %v, want %d containing %q", len(errs), errs, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want it to contain %q", i, errs[i].Error(), w)
		}
	}
}

func TestCheckAppendOnly(t *testing.T) {
	at := metav1.Unix(1_800_000_000, 0)
	old := flowv1.SessionSpec{
		Messages:  []flowv1.Message{{ID: "m1", Text: "hi"}},
		Outcomes:  []flowv1.ExternalOutcome{{Pathway: "build", Iteration: 1, ResultType: flowv1.ResultSuccess}},
		Approvals: []flowv1.Approval{{DecisionID: "d-3", Approve: ptr.To(true), By: "alice", At: &at}},
	}
	tests := []struct {
		name string
		edit func(s *flowv1.SessionSpec)
		want []string
	}{
		{"unchanged", func(*flowv1.SessionSpec) {}, nil},
		{"appends", func(s *flowv1.SessionSpec) {
			s.Messages = append(s.Messages, flowv1.Message{ID: "m2", Text: "more"})
			s.Approvals = append(s.Approvals, flowv1.Approval{DecisionID: "d-5"})
		}, nil},
		{"edited approval", func(s *flowv1.SessionSpec) { s.Approvals[0].Reason = "changed my mind" },
			[]string{"spec.approvals[0]: Forbidden: approvals are append-only"}},
		{"re-signed approval", func(s *flowv1.SessionSpec) { s.Approvals[0].By = "mallory" },
			[]string{"spec.approvals[0]"}},
		{"re-dated approval", func(s *flowv1.SessionSpec) { later := metav1.Unix(1_800_000_060, 0); s.Approvals[0].At = &later },
			[]string{"spec.approvals[0]"}},
		{"removed approval", func(s *flowv1.SessionSpec) { s.Approvals = nil },
			[]string{"spec.approvals: Forbidden: approvals are append-only: 1 of the 1 already sent would be removed"}},
		{"edited message", func(s *flowv1.SessionSpec) { s.Messages[0].Text = "bye" },
			[]string{"spec.messages[0]: Forbidden: messages are append-only"}},
		{"moved message", func(s *flowv1.SessionSpec) {
			s.Messages = []flowv1.Message{{ID: "m0", Text: "first"}, {ID: "m1", Text: "hi"}}
		}, []string{"spec.messages[0]"}},
		{"dropped processed message", func(s *flowv1.SessionSpec) {
			s.Messages, s.MessagesDropped = []flowv1.Message{{ID: "m2", Text: "more"}}, 1
		}, nil},
		{"removed message without messagesDropped", func(s *flowv1.SessionSpec) { s.Messages = nil },
			[]string{"spec.messages: Forbidden: messages are append-only: 1 of the 1 already sent would be removed"}},
		{"messagesDropped past the messages there were", func(s *flowv1.SessionSpec) { s.Messages, s.MessagesDropped = nil, 2 },
			[]string{"spec.messagesDropped: Forbidden: messagesDropped grows by 2 but spec.messages held only 1"}},
		{"edited outcome", func(s *flowv1.SessionSpec) { s.Outcomes[0].ResultType = flowv1.ResultFailure },
			[]string{"spec.outcomes[0]: Forbidden: outcomes are append-only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := old.DeepCopy()
			tt.edit(s)
			wantErrs(t, checkAppendOnly(&old, s), tt.want...)
		})
	}
}

func TestCheckForgery(t *testing.T) {
	approvals := []flowv1.Approval{
		{DecisionID: "d-1", By: "bob"}, // already stored: not checked
		{DecisionID: "d-3", By: "alice"},
	}
	wantErrs(t, checkForgery(approvals, 1, "alice"))
	wantErrs(t, checkForgery(approvals, 1, "carol"),
		`spec.approvals[1].by: Forbidden: approval forged: by is "alice" but the request was made by "carol"`)
	wantErrs(t, checkForgery([]flowv1.Approval{{DecisionID: "d-3"}}, 0, "alice"),
		"spec.approvals[0].by: Forbidden: is empty")
	wantErrs(t, checkForgery(approvals, 1, ""), "no authenticated user")
}

func TestCheckAgainstDecision(t *testing.T) {
	pending := &flowv1.DecisionRecord{
		ID: "d-7", From: "review", To: "publish", State: flowv1.DecisionPending,
		AllowedDestinations: []string{"publish", "draft"},
	}
	session := func(approvals ...flowv1.Approval) *flowv1.Session {
		s := &flowv1.Session{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
		s.Spec.Approvals = approvals
		s.Status.LastDecision = pending
		return s
	}
	tests := []struct {
		name string
		s    *flowv1.Session
		from int
		d    *flowv1.DecisionRecord
		want []string
	}{
		{"approves the pending decision", session(flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(true)}), 0, pending, nil},
		{"allowed destination", session(flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(true), Destination: "draft"}), 0, pending, nil},
		{"rejection", session(flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(false)}), 0, pending, nil},
		{"approve left out", session(flowv1.Approval{DecisionID: "d-7"}), 0, pending, []string{"say true to accept the decision or false to reject it"}},
		{"another decision", session(flowv1.Approval{DecisionID: "d-9", Approve: ptr.To(true)}), 0, pending,
			[]string{`decision "d-9" is not pending: session/s1 waits on decision d-7`}},
		{"nothing pending", session(flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(true)}), 0, nil,
			[]string{"session/s1 has no decision waiting for approval (its last decision d-7 is Pending)"}},
		{"destination not allowed", session(flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(true), Destination: "deploy"}), 0, pending,
			[]string{`spec.approvals[0].destination: Unsupported value: "deploy": supported values: "publish", "draft"`}},
		{"rejection with a destination", session(flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(false), Destination: "draft"}), 0, pending,
			[]string{"a rejection (approve: false) has no destination"}},
		{"second answer", session(
			flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(true), By: "carol"},
			flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(false)}), 1, pending,
			[]string{"decision d-7 is already answered by spec.approvals[0] (by carol); the first answer counts"}},
		{"old approvals are not re-checked", session(
			flowv1.Approval{DecisionID: "d-1", Approve: ptr.To(true)},
			flowv1.Approval{DecisionID: "d-7", Approve: ptr.To(true)}), 1, pending, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErrs(t, checkAgainstDecision(tt.s, tt.from, tt.d), tt.want...)
		})
	}
}

func TestCheckApprovers(t *testing.T) {
	approvals := []flowv1.Approval{{DecisionID: "d-7", Approve: ptr.To(true)}}
	approvers := flowv1.Approvers{Users: []string{"carol"}, Groups: []string{"release-managers"}}
	user := func(name string, groups ...string) authenticationv1.UserInfo {
		return authenticationv1.UserInfo{Username: name, Groups: groups}
	}
	wantErrs(t, checkApprovers(approvals, 0, user("carol"), approvers))
	wantErrs(t, checkApprovers(approvals, 0, user("dave", "system:authenticated", "release-managers"), approvers))
	wantErrs(t, checkApprovers(approvals, 0, user("alice", "system:authenticated"), approvers),
		`spec.approvals[0]: Forbidden: user "alice" may not answer decision d-7: its approvers are users carol and groups release-managers`)
	// A user named like a group is not in the group.
	wantErrs(t, checkApprovers(approvals, 0, user("release-managers"), approvers), "may not answer")
	wantErrs(t, checkApprovers(approvals, 0, user("carol"), flowv1.Approvers{}), "an empty list, so nobody may")
}

func TestDecisionApprovers(t *testing.T) {
	carol := &flowv1.Approvers{Users: []string{"carol"}}
	ops := &flowv1.Approvers{Groups: []string{"ops"}}
	p := &flowv1.PathwaySpec{Transitions: &flowv1.OutcomeTransitions{
		OnSuccess:        &flowv1.OutcomeTransition{To: "publish"},
		OnPartialSuccess: &flowv1.OutcomeTransition{Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"publish"}, Approvers: carol}},
		OnUnclear:        &flowv1.OutcomeTransition{Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"draft"}}},
		OnFailure:        &flowv1.OutcomeTransition{Decision: &flowv1.Decision{AllowedDestinations: []flowv1.Name{"draft"}, Approvers: ops}},
	}}
	tests := []struct {
		transition     string
		wantRestricted bool
		wantUsers      []string
		wantGroups     []string
	}{
		{"onPartialSuccess", true, []string{"carol"}, nil},
		{"onFailure", true, nil, []string{"ops"}},
		{"onUnclear", false, nil, nil},
		// An unknown transition, or one without a decision, gets the union: never less strict.
		{"onSomethingElse", true, []string{"carol"}, []string{"ops"}},
		{"onSuccess", true, []string{"carol"}, []string{"ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.transition, func(t *testing.T) {
			a, restricted := decisionApprovers(p, tt.transition)
			if restricted != tt.wantRestricted || strings.Join(a.Users, ",") != strings.Join(tt.wantUsers, ",") ||
				strings.Join(a.Groups, ",") != strings.Join(tt.wantGroups, ",") {
				t.Errorf("got %+v restricted=%v, want users %v groups %v restricted=%v", a, restricted, tt.wantUsers, tt.wantGroups, tt.wantRestricted)
			}
		})
	}
	if _, restricted := decisionApprovers(&flowv1.PathwaySpec{}, "onPartialSuccess"); restricted {
		t.Error("a pathway without transitions restricts approvals")
	}
}

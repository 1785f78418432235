package journeytest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// dropProcessed drops the first n processed messages from spec.messages, as kubectl
// journey say does in the patch that appends the next one.
func dropProcessed(t *testing.T, s *flowv1.Session, n int32) {
	t.Helper()
	if n > s.DroppableMessages()-s.Spec.MessagesDropped {
		t.Fatalf("only %d processed messages can be dropped, not %d", s.DroppableMessages()-s.Spec.MessagesDropped, n)
	}
	s.Spec.Messages = s.Spec.Messages[n:]
	s.Spec.MessagesDropped += n
}

// dropInputs drops every processed External outcome and approval from the front of
// s's spec, as kubectl journey outcome and approve do.
func dropInputs(s *flowv1.Session) {
	n := s.DroppableOutcomes() - s.Spec.OutcomesDropped
	s.Spec.Outcomes, s.Spec.OutcomesDropped = s.Spec.Outcomes[n:], s.Spec.OutcomesDropped+n
	n = s.DroppableApprovals() - s.Spec.ApprovalsDropped
	s.Spec.Approvals, s.Spec.ApprovalsDropped = s.Spec.Approvals[n:], s.Spec.ApprovalsDropped+n
}

// TestRecordAndReplayFromTheTranscript: Sessions whose processed messages left
// spec.messages (kubectl journey say drops them), and whose processed outcomes and
// approvals left theirs (kubectl journey outcome and approve drop them), are
// recorded and replayed from status.transcript: the recorded test sends every
// message, outcome and approval, passes, and the replay finds no divergence. Among
// them a Session that called builtin tools, one that called server tools, a review
// loop driven by outcomes and a plan approved by a person.
func TestRecordAndReplayFromTheTranscript(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testsDir(), "*.yaml"))
	files = append(files, filepath.Join("testdata", "builtin-tools.yaml"), filepath.Join("testdata", "server-tools.yaml"), filepath.Join("testdata", "llm-answers.yaml"))
	for _, f := range files {
		s, rev := liveObjects(t, load(t, f))
		all, outcomes, approvals := s.Spec.Messages, s.Spec.Outcomes, s.Spec.Approvals
		for _, keep := range []int32{0, 1} {
			n := int32(len(all)) - keep
			if n <= 0 {
				continue
			}
			t.Run(filepath.Base(f)+"/"+map[int32]string{0: "all dropped", 1: "the last kept"}[keep], func(t *testing.T) {
				s := s.DeepCopy()
				dropProcessed(t, s, n)
				dropInputs(s)
				if s.Spec.OutcomesDropped != int32(len(outcomes)) || s.Spec.ApprovalsDropped != int32(len(approvals)) {
					t.Fatalf("dropped %d of %d outcomes and %d of %d approvals: all are processed", s.Spec.OutcomesDropped, len(outcomes), s.Spec.ApprovalsDropped, len(approvals))
				}
				l := fetch(t, s, rev.DeepCopy())
				c, notes, r := recordAndRun(t, l)
				if len(notes) > 0 || r.Failed() {
					raw, _ := Marshal(c)
					t.Fatalf("recorded test: notes %q: %s\n%s", notes, r.Error(), raw)
				}
				var sent []string
				var sentOutcomes []OutcomeInput
				var sentApprovals []ApprovalInput
				for _, st := range c.Steps {
					if st.Message != nil {
						sent = append(sent, st.Message.Text)
					}
					if st.Outcome != nil {
						sentOutcomes = append(sentOutcomes, *st.Outcome)
					}
					if st.Approval != nil {
						sentApprovals = append(sentApprovals, *st.Approval)
					}
				}
				if len(sentOutcomes) != len(outcomes) || len(sentApprovals) != len(approvals) {
					t.Fatalf("the recorded test sends %d outcomes and %d approvals, the Session got %d and %d", len(sentOutcomes), len(sentApprovals), len(outcomes), len(approvals))
				}
				for i, o := range outcomes {
					if got := sentOutcomes[i]; got.Pathway != string(o.Pathway) || got.Iteration != o.Iteration || got.ResultType != o.ResultType {
						t.Fatalf("outcome %d: the recorded test sends %+v, the Session got %+v", i+1, got, o)
					}
				}
				for i, a := range approvals {
					if got := sentApprovals[i]; got.Approve == nil || *got.Approve != a.Approves() || got.By != a.By || got.Reason != a.Reason {
						t.Fatalf("approval %d: the recorded test sends %+v, the Session got %+v", i+1, got, a)
					}
				}
				if len(sent) != len(all) {
					t.Fatalf("the recorded test sends %d messages, the Session had %d", len(sent), len(all))
				}
				for i := range all {
					if sent[i] != all[i].Text {
						t.Fatalf("message %d: the recorded test sends %q, the Session got %q", i+1, sent[i], all[i].Text)
					}
				}
				if r.Status.ProcessedMessages != s.Status.ProcessedMessages {
					t.Fatalf("the recorded test processed %d messages, the Session %d", r.Status.ProcessedMessages, s.Status.ProcessedMessages)
				}
				rep, err := Replay(l)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Step != 0 || rep.Incomplete != nil {
					var out strings.Builder
					rep.Print(&out)
					t.Fatalf("replay:\n%s", out.String())
				}
			})
		}
	}
}

// TestRecordedBuiltinToolAnswers: a test recorded by an older record carries answers
// for builtin tool calls; they are used up, and must be what the tool computes.
func TestRecordedBuiltinToolAnswers(t *testing.T) {
	c := load(t, filepath.Join("testdata", "builtin-tools.yaml"))
	answers := []Answer{
		{Kind: flowv1.EffectCallTool, Agent: "copay", Answer: []byte(`{"result":{"copay_usd":40}}`)},
		{Kind: flowv1.EffectCallTool, Agent: "discount", Answer: []byte(`{"result":{"pct":0}}`)},
	}
	c.Steps[0].Answers = answers
	if r := Run(c); r.Failed() {
		t.Fatalf("answers the builtin tools compute: %s", r.Error())
	}
	c = load(t, filepath.Join("testdata", "builtin-tools.yaml"))
	c.Steps[0].Answers = []Answer{answers[0], {Kind: flowv1.EffectCallTool, Agent: "discount", Answer: []byte(`{"result":{"pct":15}}`)}}
	want := `answers[1] answers builtin tool discount with {"pct":15}, today's engine computes {"pct":0}: builtin tools need no recorded answer, remove it`
	if r := Run(c); !r.Failed() || !strings.Contains(r.Error(), want) {
		t.Fatalf("want %q, got %s", want, r.Error())
	}
}

// TestTrimmedTranscript: messages that left both spec.messages and status.transcript
// cannot be sent again; record and replay say which.
func TestTrimmedTranscript(t *testing.T) {
	s, rev := liveObjects(t, sampleTest(t, "healthcare-referral.yaml"))
	// The transcript holds the exchanges of m1 to m5, then confirmation's entry run.
	if len(s.Spec.Messages) != 5 || len(s.Status.Transcript) != 6 || s.Status.Transcript[0].MessageID != "m1" || s.Status.Transcript[5].MessageID != "" {
		t.Fatalf("the sample has %d messages and %d exchanges %+v", len(s.Spec.Messages), len(s.Status.Transcript), s.Status.Transcript)
	}
	for _, tc := range []struct {
		name            string
		keep, trim      int32
		outcomes, apprs int32
		want            string
	}{
		{name: "three lost", keep: 1, trim: 3,
			want: "session hc-patient-12345 cannot be replayed from its start: it no longer holds messages 1 to 3 of its 5: they left spec.messages (spec.messagesDropped is 4) and status.transcript, which dropped its 3 oldest exchanges to stay under limits.maxTranscriptBytes (of the dropped messages it holds message 4)"},
		{name: "one lost, none held", keep: 4, trim: 2,
			want: "session hc-patient-12345 cannot be replayed from its start: it no longer holds message 1 of its 5: it left spec.messages (spec.messagesDropped is 1) and status.transcript, which dropped its 2 oldest exchanges to stay under limits.maxTranscriptBytes (of the dropped messages it holds none of them)"},
		{name: "outcomes and approvals", outcomes: 2, apprs: 1, keep: 5,
			want: "session hc-patient-12345 cannot be replayed from its start: it no longer holds External outcomes 1 to 2: they left spec.outcomes (spec.outcomesDropped is 2) and status.transcript does not hold them; nor approval 1: it left spec.approvals (spec.approvalsDropped is 1) and status.transcript does not hold it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s.DeepCopy()
			dropProcessed(t, s, 5-tc.keep)
			s.Status.Transcript = s.Status.Transcript[tc.trim:]
			s.Status.TranscriptDropped = tc.trim
			s.Spec.OutcomesDropped, s.Spec.ApprovalsDropped = tc.outcomes, tc.apprs
			l := fetch(t, s, rev.DeepCopy())
			_, _, err := Record(l)
			var lost *ConversationLostError
			if !errors.As(err, &lost) || err.Error() != tc.want {
				t.Fatalf("record:\n got %v\nwant %s", err, tc.want)
			}
			if _, err := Replay(l); err == nil || err.Error() != tc.want {
				t.Fatalf("replay:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
	// A trimmed transcript loses nothing while spec.messages holds what it dropped.
	kept := s.DeepCopy()
	kept.Status.Transcript, kept.Status.TranscriptDropped = kept.Status.Transcript[3:], 3
	if _, notes, r := recordAndRun(t, fetch(t, kept, rev.DeepCopy())); len(notes) > 0 || r.Failed() {
		t.Fatalf("notes %q: %s", notes, r.Error())
	}
}

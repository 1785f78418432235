package controller

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// TestReActSequentialPipeline: the agents of a Sequential pipeline each run their own
// loop of tool calls through the real client and controller: triage finds a doctor,
// then the booker, given triage's outputs and none of its calls, books a slot.
func TestReActSequentialPipeline(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	var mu sync.Mutex
	asked := map[string][]testenv.ChatRequest{}
	answer := func(reply, doctor, booking string) testenv.Reply {
		b, _ := json.Marshal(map[string]any{"reply": reply, "outputs": map[string]any{"doctor_id": doctor, "booking_id": booking}, "outcome": "success", "complete": true})
		return testenv.Answer(string(b))
	}
	model := testenv.NewChatServer(t, func(r testenv.ChatRequest) testenv.Reply {
		who := "booker"
		if strings.Contains(r.Messages[0].Content, "You are triage.") {
			who = "triage"
		}
		mu.Lock()
		asked[who] = append(asked[who], r)
		mu.Unlock()
		results := r.ToolResults()
		switch {
		case who == "triage" && len(results) == 0:
			return callTool("find_doctors", `{"specialty":"cardiology"}`)
		case who == "triage":
			var found clinic.FindOut
			if err := json.Unmarshal([]byte(results[0].Content), &found); err != nil || len(found.Doctors) == 0 {
				return answer("find_doctors gave "+results[0].Content, "", "")
			}
			return answer("Found "+found.Doctors[0].ID, found.Doctors[0].ID, "")
		case len(results) == 0:
			if !strings.Contains(r.User(), `"doctor_id":"dr-lee"`) {
				return answer("no doctor given", "", "")
			}
			return callTool("book_slot", `{"doctor_id":"dr-lee","slot":"2026-12-01T09:00"}`)
		}
		var b clinic.Booking
		_ = json.Unmarshal([]byte(results[0].Content), &b)
		return answer("Booked "+b.ID, b.DoctorID, b.ID)
	})
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), func(j *flowv1.Journey, p *flowv1.Pathway) {
		j.Spec.Agents[0].Instructions = "You are the booker."
		j.Spec.Agents = append(j.Spec.Agents, flowv1.AgentSpec{Name: "triage", Provider: flowv1.ProviderOpenAI, Model: "test-model",
			BaseURL: model.BaseURL(), MaxRetries: ptr.To[int32](0), Instructions: "You are triage."})
		p.Spec.Agents = []flowv1.Name{"triage", "gpt"}
		p.Spec.Signature.Outputs = append(p.Spec.Signature.Outputs, flowv1.SignatureField{Name: "doctor_id", Type: "string"})
	})
	// Created with its message, as kubectl create would: the controller takes the
	// message in the Session's first step, while a replay takes it after the creation,
	// so the replay numbers the steps, and the tool calls, otherwise.
	pipe := sessionOf(ns, "pipe", "react")
	pipe.Spec.Messages = []flowv1.Message{{ID: "m1", Text: "Please book me a cardiologist."}}
	create(t, pipe)
	s := finished(t, ns, "pipe")

	lt := s.Status.LastTurn
	if s.Status.Phase != flowv1.PhaseCompleted || lt.AssistantText != "Booked b-1" || len(lt.ToolCalls) != 2 ||
		lt.ToolCalls[0].Tool != "find_doctors" || lt.ToolCalls[1].Tool != "book_slot" || lt.ToolCalls[1].State != flowv1.ToolCallDone {
		t.Fatalf("phase %s, last turn %+v", s.Status.Phase, lt)
	}
	var ctx map[string]any
	if err := json.Unmarshal(s.Status.Context.Raw, &ctx); err != nil || ctx["booking_id"] != "b-1" {
		t.Errorf("context %s (%v)", s.Status.Context.Raw, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked["triage"]) != 2 || len(asked["booker"]) != 2 {
		t.Fatalf("asked triage %d, booker %d times; want 2 each", len(asked["triage"]), len(asked["booker"]))
	}
	first := asked["booker"][0]
	if len(first.ToolResults()) != 0 || len(first.Functions()) != 2 {
		t.Errorf("the booker's first request: tool results %+v, functions %s", first.ToolResults(), first.Functions())
	}
	if r := asked["booker"][1].ToolResults(); len(r) != 1 || !strings.Contains(r[0].Content, `"b-1"`) {
		t.Errorf("the booker's re-ask carries %+v", r)
	}
	if c.Calls("find_doctors") != 1 || c.Calls("book_slot") != 1 || c.Bookings() != 1 {
		t.Errorf("clinic calls find %d book %d, bookings %d", c.Calls("find_doctors"), c.Calls("book_slot"), c.Bookings())
	}

	// With the model and the clinic gone, the Session replays from its journal: both
	// agents' answers and both tool results, without divergence and without a call,
	// although the replay names the tool calls the agents were told of otherwise.
	model.Close()
	srv.Close()
	l, err := journeytest.Fetch(t.Context(), k8sClient, types.NamespacedName{Namespace: ns, Name: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := journeytest.Replay(l)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Step != 0 || rep.Incomplete != nil {
		var out strings.Builder
		rep.Print(&out)
		t.Fatalf("replay of the pipeline:\n%s", out.String())
	}
	got := rep.Result.Status.LastTurn
	if got == nil || got.AssistantText != lt.AssistantText || len(got.ToolCalls) != 2 ||
		got.ToolCalls[0].Tool != "find_doctors" || got.ToolCalls[1].Tool != "book_slot" || got.ToolCalls[1].State != flowv1.ToolCallDone {
		t.Fatalf("the replayed last turn %+v; the Session's %+v", got, lt)
	}
	// The test recorded from it (kubectl journey record) passes offline too.
	rc, notes, err := journeytest.Record(l)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := journeytest.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := journeytest.Parse(raw)
	if err == nil {
		back.Name = rc.Name
		err = back.Resolve()
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if r := journeytest.Run(back); len(notes) > 0 || r.Failed() {
		t.Fatalf("the recorded test: notes %q, %s\n%s", notes, r.Error(), raw)
	}
	if c.Calls("find_doctors") != 1 || c.Calls("book_slot") != 1 || len(asked["triage"]) != 2 || len(asked["booker"]) != 2 {
		t.Errorf("the replay or the recorded test called the clinic or the model: find %d book %d, triage %d, booker %d",
			c.Calls("find_doctors"), c.Calls("book_slot"), len(asked["triage"]), len(asked["booker"]))
	}
}

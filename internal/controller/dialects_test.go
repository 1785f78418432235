package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// inDialect is script as a model behind a server without a tool-call parser: its
// calls come back as text in dialect d.
func inDialect(d testenv.ToolDialect, script modelScript) modelScript {
	return func(results []testenv.ToolResult) testenv.Reply { return d.Rewrite(script(results)) }
}

// bookIn is bookCardiologist for another specialty: the clinic has two slots in each
// of cardiology and general.
func bookIn(specialty string) modelScript {
	return func(results []testenv.ToolResult) testenv.Reply {
		if len(results) == 0 {
			return callTool("find_doctors", fmt.Sprintf(`{"specialty":%q}`, specialty))
		}
		return bookCardiologist(results)
	}
}

// TestReActTextDialects: a model whose calls come back as text, in each dialect, books
// through the clinic like one calling tools natively; a near-miss name written as
// text is refused like a native one, and the model is told.
func TestReActTextDialects(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	dialects := []testenv.ToolDialect{testenv.DialectHermes, testenv.DialectMistral, testenv.DialectMistralArgs, testenv.DialectBareJSON}
	scripts := map[string]modelScript{
		"nearmiss": inDialect(testenv.DialectHermes, refusedThenAnswer(callTool("find_doctor", `{"specialty":"cardiology"}`))),
	}
	for i, d := range dialects {
		scripts[string(d)] = inDialect(d, bookIn([]string{"cardiology", "general"}[i/2]))
	}
	model := newReactModel(t, scripts)
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), nil)
	talk(t, ns, "nearmiss")
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			// One after the other: each books the first free slot.
			talk(t, ns, string(d))
			s := finished(t, ns, string(d))
			lt := s.Status.LastTurn
			if s.Status.Phase != flowv1.PhaseCompleted || !strings.HasPrefix(lt.AssistantText, "Booked b-") {
				t.Fatalf("phase %s, last turn %+v", s.Status.Phase, lt)
			}
			if len(lt.ToolCalls) != 2 || lt.ToolCalls[0].Tool != "find_doctors" || lt.ToolCalls[1].Tool != "book_slot" ||
				lt.ToolCalls[0].State != flowv1.ToolCallDone || lt.ToolCalls[1].State != flowv1.ToolCallDone || len(lt.Failures) != 0 {
				t.Errorf("lastTurn.toolCalls %+v failures %+v", lt.ToolCalls, lt.Failures)
			}
			var ctx map[string]any
			if err := json.Unmarshal(s.Status.Context.Raw, &ctx); err != nil || !strings.HasPrefix(fmt.Sprint(ctx["booking_id"]), "b-") {
				t.Errorf("context %s (%v)", s.Status.Context.Raw, err)
			}
			if reqs := model.asked(string(d)); len(reqs) != 3 || len(reqs[2].ToolResults()) != 2 {
				t.Errorf("the model was asked %d times", len(reqs))
			}
		})
	}
	t.Run("nearmiss", func(t *testing.T) {
		s := finished(t, ns, "nearmiss")
		lt := s.Status.LastTurn
		const want = `tool "find_doctor" is not one of the pathway's tools`
		if len(lt.Failures) != 1 || lt.Failures[0].Source != flowv1.FailureTool || !strings.Contains(lt.Failures[0].Message, want) ||
			len(lt.ToolCalls) != 1 || lt.ToolCalls[0].State != flowv1.ToolCallFailed {
			t.Errorf("failures %+v, calls %+v", lt.Failures, lt.ToolCalls)
		}
		if s.Status.Phase != flowv1.PhaseCompleted || !strings.Contains(lt.AssistantText, want) {
			t.Errorf("the model was not told: phase %s, reply %q", s.Status.Phase, lt.AssistantText)
		}
	})
	if c.Bookings() != len(dialects) || c.Calls("find_doctors") != len(dialects) {
		t.Errorf("bookings %d, find_doctors calls %d; want %d each", c.Bookings(), c.Calls("find_doctors"), len(dialects))
	}
}

// TestReActToolLadder: behind a server that refuses native tools (vLLM without
// --enable-auto-tool-choice), an Auto agent's Session completes with the tools in the
// prompt; the Session that taught it says so in one Event, and the next Session's
// turns never offer native tools.
func TestReActToolLadder(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	c := clinic.New()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	model := newReactModel(t, map[string]modelScript{"first": bookCardiologist, "second": bookCardiologist})
	model.Respond(testenv.RefusingTools(testenv.ToolRefusals["vLLM"], model.scripted))
	startManager(t, ns, Options{})
	startReact(t, ns, srv.URL, model.BaseURL(), nil)
	talk(t, ns, "first")
	first := finished(t, ns, "first")
	talk(t, ns, "second")
	second := finished(t, ns, "second")
	for _, s := range []*flowv1.Session{first, second} {
		lt := s.Status.LastTurn
		if s.Status.Phase != flowv1.PhaseCompleted || !strings.HasPrefix(lt.AssistantText, "Booked b-") || len(lt.ToolCalls) != 2 || len(lt.Failures) != 0 {
			t.Errorf("%s: phase %s, last turn %+v", s.Name, s.Status.Phase, lt)
		}
	}
	all := model.Requests()
	for i, r := range all {
		if r.OffersTools() != (i == 0) {
			t.Errorf("request %d of %d offers native tools: %v; want the first only", i+1, len(all), r.OffersTools())
		}
	}
	if len(all) != 7 {
		t.Errorf("%d requests, want the refused one and three per Session", len(all))
	}
	eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var on []string
		for _, e := range list.Items {
			if e.Reason == flowv1.ReasonToolCallingPrompted {
				on = append(on, e.Regarding.Name+": "+e.Note)
			}
		}
		if len(on) != 1 || !strings.HasPrefix(on[0], "first: ") || !strings.Contains(on[0], "refused native tools") {
			return fmt.Errorf("ToolCallingPrompted Events %q, want one on first", on)
		}
		return nil
	})
}

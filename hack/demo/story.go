package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// tellStories applies the samples, then walks one healthcare conversation and one
// review loop turn by turn, showing what a person would see.
func tellStories(ctx context.Context, k kubectl, root string) error {
	say("Applying the sample journeys, pathways and sessions")
	if err := k.show("apply", "-k", "config/samples"); err != nil {
		return err
	}
	for _, j := range []string{"healthcare-referral", "review-loop"} {
		if _, err := k.output("wait", "--for=condition=Ready", "--timeout=30s", "journey/"+j); err != nil {
			_ = k.show("get", "journey", j, "-o", "jsonpath={.status}")
			return err
		}
	}
	if err := k.show("get", "journeys,pathways"); err != nil {
		return err
	}

	say("Healthcare referral (seed 000): a new patient, one message at a time")
	if err := k.create(ctx, `{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
		"metadata":{"name":"patient-12345","namespace":"default"},
		"spec":{"journeyRef":{"name":"healthcare-referral"},
		        "initialContext":{"insurance_id":"INS-123456","referral_source":"primary_care"}}}`); err != nil {
		return err
	}
	for i, text := range []string{
		"Hi, I need to book an appointment with a cardiologist. Here's my referral.",
		"Wait, what is the copay for specialist visits?",
		"Thanks! Now show me the available doctors.",
		"I don't want Dr. Smith. Can you show me another option?",
		"Dr. Johnson looks great. Book the Tuesday 2pm slot.",
	} {
		if err := k.say(ctx, "patient-12345", fmt.Sprintf("m%d", i+1), text); err != nil {
			return err
		}
	}
	if err := k.show("get", "session", "patient-12345", "-o", "jsonpath={.status.context.rejected_doctors}{\"\\n\"}"); err != nil {
		return err
	}

	say("Review loop (seed 002): External executors post outcomes; a failed review starts iteration 2")
	if err := k.create(ctx, `{"apiVersion":"flow.journey.dev/v1alpha1","kind":"Session",
		"metadata":{"name":"review-42","namespace":"default"},
		"spec":{"journeyRef":{"name":"review-loop"},"initialContext":{"entity":"Invoice"}}}`); err != nil {
		return err
	}
	for _, o := range []struct {
		pathway   string
		iteration int
		result    string
		data      string
	}{
		{"plan", 1, "success", `{"plan":"Invoice aggregate, repository and service"}`},
		{"generate", 1, "success", `{"files":["Invoice.java","InvoiceService.java"]}`},
		{"review", 1, "failure", `{"findings":["InvoiceService ignores currency rounding"]}`},
		{"revise", 2, "success", `{"files":["InvoiceService.java"]}`},
		{"review", 2, "success", `{}`},
	} {
		if err := k.outcome(ctx, "review-42", o.pathway, o.iteration, o.result, o.data); err != nil {
			return err
		}
	}

	say("All sessions")
	return k.show("get", "sessions", "-o", "wide")
}

func (k kubectl) create(ctx context.Context, manifest string) error {
	path := filepath.Join(filepath.Dir(k.kubeconfig), "manifest.json")
	if err := writeFile(path, manifest); err != nil {
		return err
	}
	_, err := k.output("create", "-f", path)
	return err
}

// say appends a message and waits for its turn, then prints the reply.
func (k kubectl) say(ctx context.Context, session, id, text string) error {
	msg, _ := json.Marshal(map[string]string{"id": id, "text": text})
	fmt.Printf("\n[patient] %s\n", text)
	patch := `[{"op":"add","path":"/spec/messages/-","value":` + string(msg) + `}]`
	if out, _ := k.output("get", "session", session, "-o", "jsonpath={.spec.messages}"); strings.TrimSpace(out) == "" {
		patch = `[{"op":"add","path":"/spec/messages","value":[` + string(msg) + `]}]`
	}
	if _, err := k.output("patch", "session", session, "--type=json", "-p", patch); err != nil {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "m"))
	if err := k.waitFor(ctx, session, func(st status) bool { return st.ProcessedMessages >= n }); err != nil {
		return err
	}
	st, err := k.status(session)
	if err != nil {
		return err
	}
	fmt.Printf("[%s] %s\n", st.LastTurn.Pathway, strings.TrimSpace(st.LastTurn.AssistantText))
	return k.show("get", "session", session)
}

// outcome posts an External executor's outcome and waits until the Session took it.
func (k kubectl) outcome(ctx context.Context, session, pathway string, iteration int, result, data string) error {
	fmt.Printf("\n[executor] %s (iteration %d): %s\n", pathway, iteration, result)
	value := fmt.Sprintf(`{"pathway":%q,"iteration":%d,"resultType":%q,"data":%s}`, pathway, iteration, result, data)
	before, err := k.status(session)
	if err != nil {
		return err
	}
	patch := `[{"op":"add","path":"/spec/outcomes/-","value":` + value + `}]`
	if out, _ := k.output("get", "session", session, "-o", "jsonpath={.spec.outcomes}"); strings.TrimSpace(out) == "" {
		patch = `[{"op":"add","path":"/spec/outcomes","value":[` + value + `]}]`
	}
	if _, err := k.output("patch", "session", session, "--type=json", "-p", patch); err != nil {
		return err
	}
	if err := k.waitFor(ctx, session, func(st status) bool { return st.ProcessedOutcomes > before.ProcessedOutcomes }); err != nil {
		return err
	}
	return k.show("get", "session", session)
}

type status struct {
	Phase             string `json:"phase"`
	ProcessedMessages int    `json:"processedMessages"`
	ProcessedOutcomes int    `json:"processedOutcomes"`
	LastTurn          struct {
		Pathway       string `json:"pathway"`
		AssistantText string `json:"assistantText"`
	} `json:"lastTurn"`
}

func (k kubectl) status(session string) (status, error) {
	var st status
	out, err := k.output("get", "session", session, "-o", "jsonpath={.status}")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// waitFor polls the Session until done holds and it is not Running.
func (k kubectl) waitFor(ctx context.Context, session string, done func(status) bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, err := k.status(session)
		if err == nil && done(st) && st.Phase != "Running" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("session %s did not take the input within 60s", session)
}

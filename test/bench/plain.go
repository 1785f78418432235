package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// createSessions creates sessions with workers in parallel and returns the rate.
func createSessions(ctx context.Context, c client.Client, workers int, sessions []*flowv1.Session) (float64, error) {
	start := time.Now()
	err := parallel(workers, len(sessions), func(i int) error {
		return c.Create(ctx, sessions[i])
	})
	return float64(len(sessions)) / time.Since(start).Seconds(), err
}

// plainStatusRate measures how fast a plain client, with workers in parallel, can patch
// the status of n Sessions writes times each: the same kind of write a step makes (a
// merge patch with the resourceVersion precondition, a few conditions and a turn), with
// no cache, no engine and no events. It is the physical limit of one write per step.
func plainStatusRate(ctx context.Context, c client.Client, namespace string, n, writes, workers int) (float64, error) {
	sessions := make([]*flowv1.Session, n)
	for i := range sessions {
		sessions[i] = &flowv1.Session{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("plain-%05d", i)},
			Spec: flowv1.SessionSpec{
				JourneyRef: flowv1.JourneyReference{Name: "none"},
				Messages:   []flowv1.Message{{ID: "m1", Text: "Hi, I need to book an appointment with a cardiologist."}},
			},
		}
	}
	if _, err := createSessions(ctx, c, 16, sessions); err != nil {
		return 0, err
	}
	reply := strings.Repeat("A reply of a realistic length. ", 8)
	start := time.Now()
	err := parallel(workers, n, func(i int) error {
		s := sessions[i]
		for w := 1; w <= writes; w++ {
			patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
			now := metav1.Now()
			s.Status.Step = int64(w)
			s.Status.Phase = flowv1.PhaseRunning
			s.Status.CurrentPathway = fmt.Sprintf("pathway-%d", w)
			s.Status.ProcessedMessages = 1
			s.Status.Conditions = []metav1.Condition{
				{Type: flowv1.ConditionReady, Status: metav1.ConditionTrue, Reason: flowv1.ReasonProgressing, Message: fmt.Sprintf("Working in pathway pathway-%d", w), LastTransitionTime: now},
				{Type: flowv1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: flowv1.ReasonProgressing, Message: fmt.Sprintf("Working in pathway pathway-%d", w), LastTransitionTime: now},
			}
			s.Status.LastTurn = &flowv1.TurnOutcome{Trigger: flowv1.TurnMessage, MessageID: "m1", Pathway: s.Status.CurrentPathway,
				FinishReason: flowv1.FinishSuccess, AssistantText: reply, ResultType: flowv1.ResultSuccess, Complete: true}
			s.Status.History = append(s.Status.History, flowv1.HistoryEntry{Time: now, Step: int64(w), From: fmt.Sprintf("pathway-%d", w-1),
				To: s.Status.CurrentPathway, Action: flowv1.ActionAdvance, Source: flowv1.SourceNext, Transition: "next", Iteration: 1})
			if err := c.Status().Patch(ctx, s, patch); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(n*writes) / time.Since(start).Seconds(), nil
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

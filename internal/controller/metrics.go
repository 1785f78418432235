package controller

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Metrics carry the journey_ prefix and never a label per Session.
var (
	stepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "journey_steps_total",
		Help: "Session steps by journey and result: changed, effect (an agent call), error, unchanged (nothing to do, nothing written).",
	}, []string{"journey", "result"})
	transitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "journey_transitions_total",
		Help: "Transitions taken, by journey and action.",
	}, []string{"journey", "action"})
	agentDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "journey_agent_request_duration_seconds",
		Help:    "Duration of agent and tool calls, retries included, by provider (tool for a tool call), role (RunPathway, Decide, ClassifyIntent, CallTool) and result (ok, Transient, Terminal, Invalid).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
	}, []string{"provider", "role", "result"})
	agentTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "journey_agent_tokens_total",
		Help: "Tokens used by agent calls, by provider and kind (prompt, completion).",
	}, []string{"provider", "kind"})
)

// sessionsCollector reports Sessions by phase from the informer cache at scrape time,
// so the gauge is right after a restart and costs nothing between scrapes.
type sessionsCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

func (c *sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	var list flowv1.SessionList
	if err := c.reader.List(context.Background(), &list); err != nil {
		return
	}
	counts := map[flowv1.Phase]int{}
	for i := range list.Items {
		phase := list.Items[i].Status.Phase
		if phase == "" {
			phase = flowv1.PhasePending
		}
		counts[phase]++
	}
	for _, phase := range []flowv1.Phase{flowv1.PhasePending, flowv1.PhaseRunning, flowv1.PhaseWaitingForInput,
		flowv1.PhaseAwaitingApproval, flowv1.PhaseEscalated, flowv1.PhaseCompleted, flowv1.PhaseFailed, flowv1.PhaseCancelled} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
	}
}

var registerOnce sync.Once

// registerMetrics adds the journey_ metrics to controller-runtime's registry once.
func registerMetrics(reader client.Reader) {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(stepsTotal, transitionsTotal, agentDuration, agentTokens, eventsDropped, &sessionsCollector{
			reader: reader,
			desc:   prometheus.NewDesc("journey_sessions", "Sessions by phase.", []string{"phase"}, nil),
		})
	})
}

package main

import (
	"fmt"
	"math"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// What a turn waits for inside the manager, from the controller-runtime metrics of
// the Session controller (the manager runs in this process, so its registry is
// read directly): how long a Session waited in the workqueue before a worker took it
// (workqueue_queue_duration_seconds), how long its reconcile took
// (controller_runtime_reconcile_time_seconds), the reconciles by result (a requeue
// or an error goes through the rate limiter), and the client requests that waited in
// the client's rate limiter (rest_client_rate_limiter_duration_seconds, every
// client of this process: the harness's never waits).

// queueStats are the Session controller's queue and reconcile figures over a window.
type queueStats struct {
	Adds       float64            `json:"adds"`
	Retries    float64            `json:"retries"`
	Reconciles map[string]float64 `json:"reconciles"` // by result
	// DepthStart is the queue's depth when the window opened.
	DepthStart   float64 `json:"depthStart"`
	QueueP50     float64 `json:"queueWaitP50ms"`
	QueueP99     float64 `json:"queueWaitP99ms"`
	ReconcileP50 float64 `json:"reconcileP50ms"`
	ReconcileP99 float64 `json:"reconcileP99ms"`
	// RateLimited counts the client requests that waited 5 ms or more for the client's
	// rate limiter; RateLimitP99 is the p99 of all waits.
	RateLimited  float64 `json:"clientRateLimitedRequests"`
	RateLimitP99 float64 `json:"clientRateLimitWaitP99ms"`
	// PatchP50 and PatchP99 are the API server's answer times to this process's
	// PATCH requests (the users' writes and the manager's status writes).
	PatchP50 float64 `json:"patchP50ms"`
	PatchP99 float64 `json:"patchP99ms"`
}

func (q *queueStats) String() string {
	if q == nil {
		return "no queue figures"
	}
	var res []string
	for _, r := range []string{"success", "requeue", "requeue_after", "error"} {
		if n := q.Reconciles[r]; n > 0 {
			res = append(res, fmt.Sprintf("%s %.0f", r, n))
		}
	}
	return fmt.Sprintf("queue depth at start %.0f, %.0f adds, %.0f retries; queue wait p50 %.1f ms p99 %.1f ms; reconcile p50 %.1f ms p99 %.1f ms (%s); %.0f client requests rate limited (wait p99 %.1f ms); PATCH answered in p50 %.1f ms p99 %.1f ms",
		q.DepthStart, q.Adds, q.Retries, q.QueueP50, q.QueueP99, q.ReconcileP50, q.ReconcileP99, strings.Join(res, ", "), q.RateLimited, q.RateLimitP99, q.PatchP50, q.PatchP99)
}

// metricSnapshot is the manager's metrics at one moment.
type metricSnapshot map[string]*dto.MetricFamily

func snapshotMetrics() metricSnapshot {
	fams, err := metrics.Registry.Gather()
	if err != nil {
		return nil
	}
	s := metricSnapshot{}
	for _, f := range fams {
		s[f.GetName()] = f
	}
	return s
}

// sessionQueue is the Session controller's figures between snapshots a and b.
func sessionQueue(a, b metricSnapshot) *queueStats {
	if a == nil || b == nil {
		return nil
	}
	q := &queueStats{Reconciles: map[string]float64{}}
	onSession := func(label string) func(*dto.Metric) bool {
		return func(m *dto.Metric) bool { return labelOf(m, label) == "session" }
	}
	q.Adds = counter(b, "workqueue_adds_total", onSession("name")) - counter(a, "workqueue_adds_total", onSession("name"))
	q.Retries = counter(b, "workqueue_retries_total", onSession("name")) - counter(a, "workqueue_retries_total", onSession("name"))
	q.DepthStart = gauge(a, "workqueue_depth", onSession("name"))
	for _, r := range []string{"success", "requeue", "requeue_after", "error"} {
		is := func(m *dto.Metric) bool { return labelOf(m, "controller") == "session" && labelOf(m, "result") == r }
		q.Reconciles[r] = counter(b, "controller_runtime_reconcile_total", is) - counter(a, "controller_runtime_reconcile_total", is)
	}
	wait := histogramDelta(a, b, "workqueue_queue_duration_seconds", onSession("name"))
	q.QueueP50, q.QueueP99 = wait.quantileMs(0.5), wait.quantileMs(0.99)
	rec := histogramDelta(a, b, "controller_runtime_reconcile_time_seconds", onSession("controller"))
	q.ReconcileP50, q.ReconcileP99 = rec.quantileMs(0.5), rec.quantileMs(0.99)
	limiter := histogramDelta(a, b, "rest_client_rate_limiter_duration_seconds", func(*dto.Metric) bool { return true })
	q.RateLimited = limiter.countAbove(0.005)
	q.RateLimitP99 = limiter.quantileMs(0.99)
	patch := histogramDelta(a, b, "rest_client_request_duration_seconds", func(m *dto.Metric) bool { return labelOf(m, "verb") == "PATCH" })
	q.PatchP50, q.PatchP99 = patch.quantileMs(0.5), patch.quantileMs(0.99)
	return q
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func counter(s metricSnapshot, name string, match func(*dto.Metric) bool) float64 {
	sum := 0.0
	for _, m := range s[name].GetMetric() {
		if match(m) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func gauge(s metricSnapshot, name string, match func(*dto.Metric) bool) float64 {
	sum := 0.0
	for _, m := range s[name].GetMetric() {
		if match(m) {
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

// histogram is a classic histogram's buckets: upper bounds and cumulative counts.
type histogram struct {
	bounds []float64
	counts []float64
	total  float64
}

// histogramDelta is the sum of the matching series of histogram name in b, less in a.
func histogramDelta(a, b metricSnapshot, name string, match func(*dto.Metric) bool) histogram {
	var h histogram
	add := func(s metricSnapshot, sign float64) {
		for _, m := range s[name].GetMetric() {
			if !match(m) || m.GetHistogram() == nil {
				continue
			}
			hm := m.GetHistogram()
			if h.bounds == nil {
				for _, bk := range hm.GetBucket() {
					h.bounds = append(h.bounds, bk.GetUpperBound())
				}
				h.counts = make([]float64, len(h.bounds))
			}
			for i, bk := range hm.GetBucket() {
				if i < len(h.counts) {
					h.counts[i] += sign * float64(bk.GetCumulativeCount())
				}
			}
			h.total += sign * float64(hm.GetSampleCount())
		}
	}
	add(b, 1)
	add(a, -1)
	return h
}

// quantileMs estimates quantile q in milliseconds, interpolating linearly inside the
// bucket it falls in (the +Inf bucket answers its lower bound).
func (h histogram) quantileMs(q float64) float64 {
	if h.total <= 0 {
		return 0
	}
	rank := q * h.total
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			upper := h.bounds[i]
			if math.IsInf(upper, 1) || c == below {
				return lower * 1000
			}
			return (lower + (upper-lower)*(rank-below)/(c-below)) * 1000
		}
		lower, below = h.bounds[i], c
	}
	return lower * 1000
}

// countAbove is how many observations were over bound seconds (bound an upper bound of
// a bucket).
func (h histogram) countAbove(bound float64) float64 {
	for i, b := range h.bounds {
		if b >= bound {
			return h.total - h.counts[i]
		}
	}
	return 0
}

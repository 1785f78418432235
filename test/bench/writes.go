package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// writeCounter counts the successful writes to Sessions that the API server served,
// from its own request counter (apiserver_request_total on /metrics): a write of the
// status subresource is a status write, any other (the user's message) a spec write.
// Exact whatever the load, unlike a watch, which falls behind and expires when the
// machine is busy. The counter is the API server's, so it counts every namespace: the
// bench's phases run one after the other, and each takes the difference over its own
// span.
type writeCounter struct {
	rc   rest.Interface
	last writeCounts
}

// writeCounts are the writes counted so far.
type writeCounts struct {
	Spec   int64 `json:"spec"`
	Status int64 `json:"status"`
}

func (w writeCounts) sub(o writeCounts) writeCounts {
	return writeCounts{Spec: w.Spec - o.Spec, Status: w.Status - o.Status}
}

// countWrites starts counting the writes to Sessions.
func countWrites(_ context.Context, cfg *rest.Config, _ string) (*writeCounter, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	w := &writeCounter{rc: dc.RESTClient()}
	if w.last, err = w.read(); err != nil {
		return nil, fmt.Errorf("write counter: %w", err)
	}
	return w, nil
}

// read scrapes the API server's request counter for Sessions.
func (w *writeCounter) read() (writeCounts, error) {
	body, err := w.rc.Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return writeCounts{}, err
	}
	return sessionWrites(body)
}

// sessionWrites sums apiserver_request_total over the successful writes (PATCH,
// UPDATE, APPLY with a 2xx code) of resource sessions.
func sessionWrites(metrics []byte) (writeCounts, error) { return resourceWrites(metrics, "sessions") }

// resourceWrites sums apiserver_request_total over the successful writes of resource
// (of group flow.journey.dev), status subresource apart.
func resourceWrites(metrics []byte, resource string) (writeCounts, error) {
	var out writeCounts
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels, value := line[len("apiserver_request_total{"):end], strings.TrimSpace(line[end+1:])
		if label(labels, "resource") != resource || !strings.HasPrefix(label(labels, "code"), "2") {
			continue
		}
		switch label(labels, "verb") {
		case "PATCH", "UPDATE", "APPLY":
		default:
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return writeCounts{}, fmt.Errorf("apiserver_request_total: %q: %w", value, err)
		}
		if label(labels, "subresource") == "status" {
			out.Status += int64(v)
		} else {
			out.Spec += int64(v)
		}
	}
	return out, sc.Err()
}

// label is the value of name in a Prometheus label set (name="value",...).
func label(labels, name string) string {
	i := strings.Index(","+labels, ","+name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// snapshot is the writes counted so far, or the last count when the scrape failed.
func (w *writeCounter) snapshot() writeCounts {
	c, err := w.read()
	if err != nil {
		logf("write counter: %v", err)
		return w.last
	}
	w.last = c
	return c
}

// settle waits until no write to a Session was served for quiet (at most 10 s): the
// writes of turns that just ended are counted by then.
func (w *writeCounter) settle(quiet time.Duration) writeCounts {
	last := w.snapshot()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(quiet)
		now := w.snapshot()
		if now == last {
			return now
		}
		last = now
	}
	return last
}

// stop is a no-op: the counter holds nothing.
func (w *writeCounter) stop() {}

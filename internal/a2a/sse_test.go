package a2a_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	gateway "github.com/journeyops/journey-operator/internal/a2a"
)

// sseEvent is one Server-Sent Event of a stream as it went over the wire.
type sseEvent struct {
	id   string // its id line's
	data struct {
		Result *struct {
			Kind     string         `json:"kind"`
			Metadata map[string]any `json:"metadata"`
		} `json:"result"`
		Error *struct {
			Message string
			Data    struct{ Error string }
		} `json:"error"`
	}
}

func (e sseEvent) String() string {
	if e.data.Error != nil {
		return fmt.Sprintf("id=%q error %s: %s", e.id, e.data.Error.Message, e.data.Error.Data.Error)
	}
	return fmt.Sprintf("id=%q %s %v", e.id, e.data.Result.Kind, e.data.Result.Metadata[gateway.MetaEventID])
}

// stream posts a streaming JSON-RPC request (message/stream, tasks/resubscribe) with
// alice's token and the headers, and reads its Server-Sent Events to the end.
func (f *fixture) stream(t *testing.T, method, params string, header http.Header) []sseEvent {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": %q, "params": %s}`, method, params)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.gw.URL+"/a2a/"+f.ns+"/desk", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Authorization", "Bearer "+f.alice)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("%s answered %s %s, not an event stream", method, resp.Status, ct)
	}
	var events []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			events = append(events, ev)
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func ids(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.id)
	}
	return out
}

// The Server-Sent Events of a stream carry the gateway's event ids, so a client that
// reconnects the way Server-Sent Events clients do, with the Last-Event-ID header,
// gets exactly the events after the last it saw, as with the metadata.
func TestResubscribeWithLastEventIDHeader(t *testing.T) {
	f := setup(t)
	c := f.client(t, f.gw, f.alice)
	task := send(t, c, message("", text("hello")))

	full := f.stream(t, "message/stream",
		fmt.Sprintf(`{"message": {"kind": "message", "messageId": "tour-1", "role": "user", "taskId": %q, "parts": [{"kind": "text", "text": "show me the tour"}]}}`, task.ID), nil)
	if len(full) != 6 {
		t.Fatalf("the tour's stream has %d events, want a task, 4 replies and input-required: %v", len(full), full)
	}
	for i, e := range full {
		if e.data.Result == nil || e.id == "" || e.id != e.data.Result.Metadata[gateway.MetaEventID] {
			t.Fatalf("event %d: its id line is not its event id: %v", i+1, full)
		}
	}

	// Reconnecting after the second event, with its id in the header.
	rest := f.stream(t, "tasks/resubscribe", fmt.Sprintf(`{"id": %q}`, task.ID), http.Header{gateway.LastEventIDHeader: {full[1].id}})
	if got, want := ids(rest), ids(full[2:]); !slices.Equal(got, want) {
		t.Errorf("resubscribing with Last-Event-ID %s: events %q, want %q", full[1].id, got, want)
	}

	// The header and the metadata must agree; an id the gateway never sent is refused,
	// naming the header.
	both := f.stream(t, "tasks/resubscribe",
		fmt.Sprintf(`{"id": %q, "metadata": {%q: %q}}`, task.ID, gateway.MetaLastEventID, full[2].id), http.Header{gateway.LastEventIDHeader: {full[1].id}})
	if len(both) != 1 || both[0].data.Error == nil || !strings.Contains(both[0].data.Error.Data.Error, "name different events") || both[0].id != "" {
		t.Errorf("a header and metadata that disagree: %v, want one error event without an id", both)
	}
	foreign := f.stream(t, "tasks/resubscribe", fmt.Sprintf(`{"id": %q}`, task.ID), http.Header{gateway.LastEventIDHeader: {"0b6cbd2e-4f51-4a59-a0c5-1c2b0a7d8e9f"}})
	if len(foreign) != 1 || foreign[0].data.Error == nil || !strings.Contains(foreign[0].data.Error.Data.Error, "the Last-Event-ID header") {
		t.Errorf("a Last-Event-ID the gateway never sent: %v, want an error naming the header", foreign)
	}
}

package a2a

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// LastEventIDHeader is the header of a Server-Sent Events client that reconnects: the
// id of the last event it saw. tasks/resubscribe takes it as it takes the metadata
// MetaLastEventID.
const LastEventIDHeader = "Last-Event-ID"

// sseEventIDs is the response writer of the A2A SDK's JSON-RPC handler that gives the
// Server-Sent Events of a stream the gateway's event ids: the SDK writes a random id
// per event, which no reconnecting client could resume from; the event id is the one
// its data carries in metadata MetaEventID. An event whose data carries none (an error)
// goes without an id, so a client keeps the last one it had. Responses that are not
// event streams pass unchanged.
type sseEventIDs struct {
	http.ResponseWriter
	stream  bool
	pending []byte // the start of an event not written yet
}

func (w *sseEventIDs) WriteHeader(code int) {
	w.stream = w.Header().Get("Content-Type") == "text/event-stream"
	w.ResponseWriter.WriteHeader(code)
}

// Write writes the complete events of p (and of what came before it), each with its
// id; the rest waits for the next write.
func (w *sseEventIDs) Write(p []byte) (int, error) {
	if !w.stream {
		return w.ResponseWriter.Write(p)
	}
	w.pending = append(w.pending, p...)
	for {
		end := bytes.Index(w.pending, []byte("\n\n"))
		if end < 0 {
			return len(p), nil
		}
		event := withEventID(w.pending[:end+2])
		w.pending = w.pending[end+2:]
		if _, err := w.ResponseWriter.Write(event); err != nil {
			return 0, err
		}
	}
}

// Flush implements http.Flusher, which the SDK's stream requires.
func (w *sseEventIDs) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// withEventID is event (its lines, ending with a blank line) with its id line set to
// the event id of its JSON-RPC data, or removed when the data carries none.
func withEventID(event []byte) []byte {
	lines := bytes.Split(bytes.TrimSuffix(event, []byte("\n\n")), []byte("\n"))
	id := ""
	for _, l := range lines {
		if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			var resp struct {
				Result struct {
					Metadata map[string]any `json:"metadata"`
				} `json:"result"`
			}
			if json.Unmarshal(data, &resp) == nil {
				id, _ = resp.Result.Metadata[MetaEventID].(string)
			}
			if bytes.ContainsAny([]byte(id), "\r\n") {
				id = ""
			}
		}
	}
	var out bytes.Buffer
	if id != "" {
		out.WriteString("id: " + id + "\n")
	}
	for _, l := range lines {
		if !bytes.HasPrefix(l, []byte("id:")) {
			out.Write(l)
			out.WriteByte('\n')
		}
	}
	out.WriteByte('\n')
	return out.Bytes()
}

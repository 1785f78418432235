package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// event is one Server-Sent Event.
type event struct {
	name string
	data any
}

// sessionFeed subscribes to the Session informer (fed by a watch as the caller) until
// the request ends; fn turns each change into an event or nil. Added Sessions that the
// informer already held when the feed starts are passed with initial true.
func (s *Server) sessionFeed(w http.ResponseWriter, r *http.Request, fn func(s *flowv1alpha1.Session, deleted, initial bool) *event) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	events := make(chan event, 1024)
	overflow := make(chan struct{}, 1)
	push := func(obj any, deleted, initial bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		ss, ok := obj.(*flowv1alpha1.Session)
		if !ok {
			return
		}
		if e := fn(ss, deleted, initial); e != nil {
			select {
			case events <- *e:
			default:
				select {
				case overflow <- struct{}{}:
				default:
				}
			}
		}
	}
	reg, err := s.session.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { push(obj, false, initial) },
		UpdateFunc: func(_, obj any) { push(obj, false, false) },
		DeleteFunc: func(obj any) { push(obj, true, false) },
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() { _ = s.session.RemoveEventHandler(reg) }()

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-overflow:
			writeEvent(w, event{name: "reload", data: "too many changes at once"})
			flusher.Flush()
			return
		case <-heartbeat.C:
			fmt.Fprint(w, ": still here\n\n")
		case e := <-events:
			writeEvent(w, e)
		}
		flusher.Flush()
	}
}

func writeEvent(w http.ResponseWriter, e event) {
	data, err := json.Marshal(e.data)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, data)
}

type rowEvent struct {
	ID   string `json:"id"`
	HTML string `json:"html,omitempty"`
}

// sessionEvents streams the rows of the Sessions table that the filter selects: "row"
// events with a row's HTML (new or changed) and "remove" events.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r)
	s.sessionFeed(w, r, func(ss *flowv1alpha1.Session, deleted, _ bool) *event {
		id := rowID(ss.Namespace, ss.Name)
		if deleted || !f.match(ss) {
			// A Session that no longer matches (its phase moved on) leaves the table.
			return &event{name: "remove", data: rowEvent{ID: id}}
		}
		var buf bytes.Buffer
		if err := s.pages.byName["sessions"].ExecuteTemplate(&buf, "row", rowOf(ss, s.opts.Now())); err != nil {
			return nil
		}
		return &event{name: "row", data: rowEvent{ID: id, HTML: buf.String()}}
	})
}

// changeEvents sends a "change" event whenever a Session that the page shows changes:
// ?session=ns/name for one Session, ?journey=ns/name for a Journey's Sessions, or
// nothing for any Session (the Approvals page). The page then reloads its content.
func (s *Server) changeEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	session, journey := q.Get("session"), q.Get("journey")
	s.sessionFeed(w, r, func(ss *flowv1alpha1.Session, _, initial bool) *event {
		if initial {
			return nil
		}
		key := ss.Namespace + "/" + ss.Name
		switch {
		case session != "" && session != key:
			return nil
		case journey != "" && journey != ss.Namespace+"/"+ss.Spec.JourneyRef.Name:
			return nil
		}
		return &event{name: "change", data: strings.TrimSpace(key)}
	})
}

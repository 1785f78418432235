package a2a

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/plugin"
)

// MaxMessageBytes is the most text one A2A message may carry: what one message of a
// Session holds (spec.messages[].text).
const MaxMessageBytes = 8192

// messageIDPattern is the rule of the Session's message ids (spec.messages[].id): an
// A2A message id that follows it is kept as the Session's message id, so a message
// sent twice is taken once.
var messageIDPattern = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]{0,63}$`)

// journeyHandler answers the A2A requests of one caller to one journey's agent, with
// a client that acts as the caller. It reads and writes Sessions only.
type journeyHandler struct {
	c         client.WithWatch
	namespace string
	journey   string
	caller    *Caller
	now       func() time.Time
	// maxWait bounds how long a blocking message/send or tasks/cancel waits for the
	// Session to settle; it then answers with the task as it is.
	maxWait time.Duration
	// lastEventID is the request's Last-Event-ID header: the last event a
	// reconnecting Server-Sent Events client saw.
	lastEventID string
}

var _ a2asrv.RequestHandler = (*journeyHandler)(nil)

// protocolError is err as an A2A error: the API server's answer (forbidden, not
// found, invalid) with its message.
func protocolError(err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	switch {
	case errors.Is(err, a2a.ErrTaskNotFound), errors.Is(err, a2a.ErrInvalidParams),
		errors.Is(err, a2a.ErrTaskNotCancelable), errors.Is(err, a2a.ErrUnsupportedContentType):
		return err
	case apierrors.IsNotFound(err):
		sentinel = a2a.ErrTaskNotFound
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		sentinel = a2a.ErrInvalidParams
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		sentinel = a2a.ErrServerError
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		sentinel = a2a.ErrServerError
	default:
		sentinel = a2a.ErrInternalError
	}
	return fmt.Errorf("%s: %w", err.Error(), sentinel)
}

// session gets the Session name of the handler's journey, as the caller.
func (h *journeyHandler) session(ctx context.Context, name string) (*flowv1.Session, error) {
	if name == "" {
		return nil, fmt.Errorf("id: a task id is required: %w", a2a.ErrInvalidParams)
	}
	s := &flowv1.Session{}
	if err := h.c.Get(ctx, types.NamespacedName{Namespace: h.namespace, Name: name}, s); err != nil {
		return nil, err
	}
	if s.Spec.JourneyRef.Name != h.journey {
		return nil, fmt.Errorf("task %s is a Session of the journey %s, not %s: %w", name, s.Spec.JourneyRef.Name, h.journey, a2a.ErrTaskNotFound)
	}
	return s, nil
}

// OnGetTask is tasks/get: the Session as a task.
func (h *journeyHandler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	s, err := h.session(ctx, string(q.ID))
	if err != nil {
		return nil, protocolError(err)
	}
	return Task(s, q.HistoryLength), nil
}

// OnCancelTask is tasks/cancel: spec.cancel is set, and the task returned once the
// Session is Cancelled (or as it is after maxWait).
func (h *journeyHandler) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	s, err := h.session(ctx, string(p.ID))
	if err != nil {
		return nil, protocolError(err)
	}
	if s.Status.Phase.IsTerminal() && s.Status.Phase != flowv1.PhaseCancelled {
		return nil, fmt.Errorf("task %s is %s: %w", s.Name, State(s), a2a.ErrTaskNotCancelable)
	}
	if !s.Spec.Cancel {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))
		if err := h.c.Patch(ctx, s, patch); err != nil {
			return nil, protocolError(err)
		}
	}
	last, err := h.wait(ctx, s.Name, cursor{exchanges: exchangeCount(s), step: s.Status.Step})
	if err != nil {
		return nil, protocolError(err)
	}
	return Task(last, nil), nil
}

// request is what an A2A message asks of a Session: a message to send, or an
// approval of the decision it waits on.
type request struct {
	text     string
	approval *plugin.ApprovalRequest
}

// parseMessage reads an A2A message: its text parts joined, or a data part with
// "approve" (true or false), "decision", "to" and "reason".
func parseMessage(m *a2a.Message) (request, error) {
	var r request
	var texts []string
	for i, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case a2a.DataPart:
			v, ok := p.Data["approve"]
			if !ok {
				return r, fmt.Errorf(`message.parts[%d]: a data part must be an approval, with "approve" true or false: %w`, i, a2a.ErrInvalidParams)
			}
			approve, ok := v.(bool)
			if !ok {
				return r, fmt.Errorf(`message.parts[%d].data.approve must be true or false, not %v: %w`, i, v, a2a.ErrInvalidParams)
			}
			ar := &plugin.ApprovalRequest{Reject: !approve}
			for field, dst := range map[string]*string{"decision": &ar.DecisionID, "to": &ar.To, "reason": &ar.Reason} {
				if v, ok := p.Data[field]; ok {
					s, ok := v.(string)
					if !ok {
						return r, fmt.Errorf("message.parts[%d].data.%s must be a string: %w", i, field, a2a.ErrInvalidParams)
					}
					*dst = s
				}
			}
			r.approval = ar
		default:
			return r, fmt.Errorf("message.parts[%d]: only text parts, and a data part that answers an approval, are taken: %w", i, a2a.ErrUnsupportedContentType)
		}
	}
	r.text = strings.Join(texts, "\n")
	if r.approval != nil {
		if r.approval.Reason == "" {
			r.approval.Reason = r.text
		}
		return r, nil
	}
	if strings.TrimSpace(r.text) == "" {
		return r, fmt.Errorf("message.parts: the message has no text: %w", a2a.ErrInvalidParams)
	}
	if len(r.text) > MaxMessageBytes {
		return r, fmt.Errorf("message.parts: the text is %d bytes; a Session's message holds at most %d: %w", len(r.text), MaxMessageBytes, a2a.ErrInvalidParams)
	}
	return r, nil
}

// send starts a Session with the message, or sends it to the Session the message's
// task id (else its context id) names. It returns the Session as it was before (a
// snapshot of the task for the client) and the cursor its events follow.
func (h *journeyHandler) send(ctx context.Context, p *a2a.MessageSendParams) (*flowv1.Session, cursor, error) {
	if p == nil || p.Message == nil {
		return nil, cursor{}, fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	m := p.Message
	req, err := parseMessage(m)
	if err != nil {
		return nil, cursor{}, err
	}
	id := ""
	if messageIDPattern.MatchString(m.ID) {
		id = m.ID
	}
	name := string(m.TaskID)
	if name == "" {
		name = m.ContextID
	}
	var s *flowv1.Session
	if name != "" {
		s, err = h.session(ctx, name)
		if err != nil && (!apierrors.IsNotFound(err) || m.TaskID != "") {
			return nil, cursor{}, protocolError(err)
		}
	}
	if s == nil {
		s, err = h.start(ctx, m.ContextID, id, req)
		return s, cursor{}, err
	}
	before := cursor{exchanges: exchangeCount(s), step: s.Status.Step}
	key := client.ObjectKeyFromObject(s)
	if req.approval != nil {
		ar := *req.approval
		ar.By, ar.At = h.caller.Name, h.now()
		if _, err := plugin.Approve(ctx, h.c, key, ar); err != nil {
			return nil, cursor{}, sendError(err)
		}
		return s, before, nil
	}
	if _, _, err := plugin.SendMessage(ctx, h.c, key, id, req.text); err != nil {
		return nil, cursor{}, sendError(err)
	}
	return s, before, nil
}

// sendError is an error of the plugin's senders as an A2A error: the API server's
// answers keep their kind, the checks made before sending are invalid params.
func sendError(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return protocolError(err)
	}
	return fmt.Errorf("%s: %w", err.Error(), a2a.ErrInvalidParams)
}

// start creates a Session of the journey with its first message, named name (the
// message's context id) when given.
func (h *journeyHandler) start(ctx context.Context, name, id string, req request) (*flowv1.Session, error) {
	if req.approval != nil {
		return nil, fmt.Errorf("message: an approval needs the task id of the Session that waits for it: %w", a2a.ErrInvalidParams)
	}
	if id == "" {
		id = "m-1"
	}
	s := &flowv1.Session{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name},
		Spec: flowv1.SessionSpec{
			JourneyRef: flowv1.JourneyReference{Name: h.journey},
			Messages:   []flowv1.Message{{ID: id, Text: req.text}},
		},
	}
	if name == "" {
		s.GenerateName = h.journey + "-"
	} else if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("message.contextId %q cannot name a new Session: %s: %w", name, strings.Join(errs, "; "), a2a.ErrInvalidParams)
	}
	if err := h.c.Create(ctx, s); err != nil {
		return nil, protocolError(err)
	}
	return s, nil
}

// snapshot is the task of Session s as the client's message left it: taken in, not
// yet answered.
func snapshot(s *flowv1.Session, at cursor) *a2a.Task {
	t := Task(s, nil)
	t.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
	if !s.Status.Phase.HasStarted() {
		t.Status.State = a2a.TaskStateSubmitted
	}
	t.Metadata[MetaEventID] = at.id()
	return t
}

// OnSendMessage is message/send: the message is sent, and the task returned once the
// Session has answered it (settled), or at once when the configuration says not to
// block.
func (h *journeyHandler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	s, at, err := h.send(ctx, p)
	if err != nil {
		return nil, err
	}
	if p.Config != nil && p.Config.Blocking != nil && !*p.Config.Blocking {
		return snapshot(s, at), nil
	}
	last, err := h.wait(ctx, s.Name, at)
	if err != nil {
		return nil, protocolError(err)
	}
	var historyLength *int
	if p.Config != nil {
		historyLength = p.Config.HistoryLength
	}
	return Task(last, historyLength), nil
}

// OnSendMessageStream is message/stream: the message is sent; the stream is the task
// as the message left it, then the Session's events after it, up to the settled state
// that ends the turn.
func (h *journeyHandler) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s, at, err := h.send(ctx, p)
		if err != nil {
			yield(nil, err)
			return
		}
		if !yield(snapshot(s, at), nil) {
			return
		}
		h.follow(ctx, s.Name, at, yield)
	}
}

// OnResubscribeToTask is tasks/resubscribe. With the id of the last event the client
// saw (metadata flow.journey.dev/lastEventId, or the Last-Event-ID header of a
// reconnecting Server-Sent Events client) it replays the events after it from the
// Session's status, then goes on live; without, it starts with the task as it is.
func (h *journeyHandler) OnResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s, err := h.session(ctx, string(p.ID))
		if err != nil {
			yield(nil, protocolError(err))
			return
		}
		id, from, err := h.resumeFrom(p)
		if err != nil {
			yield(nil, err)
			return
		}
		var at cursor
		if from != "" {
			if at, err = parseCursor(id); err != nil {
				yield(nil, fmt.Errorf("%s: %w: %w", from, err, a2a.ErrInvalidParams))
				return
			}
		} else {
			at = here(s)
			if !yield(Task(s, nil), nil) || at.state != "" {
				return
			}
		}
		h.follow(ctx, s.Name, at, yield)
	}
}

// resumeFrom is the id of the last event the client of tasks/resubscribe saw, and
// where it said so (empty when it did not): the metadata, or the Last-Event-ID header.
func (h *journeyHandler) resumeFrom(p *a2a.TaskIDParams) (id, from string, err error) {
	v, inMeta := p.Metadata[MetaLastEventID]
	if !inMeta {
		if h.lastEventID == "" {
			return "", "", nil
		}
		return h.lastEventID, "the " + LastEventIDHeader + " header", nil
	}
	id, _ = v.(string)
	if h.lastEventID != "" && h.lastEventID != id {
		return "", "", fmt.Errorf("metadata.%s %q and the %s header %q name different events: %w",
			MetaLastEventID, id, LastEventIDHeader, h.lastEventID, a2a.ErrInvalidParams)
	}
	return id, "metadata." + MetaLastEventID, nil
}

// follow yields the events of Session name after cursor at as its status changes,
// until a settled state ends them, the client goes away or the Session is deleted.
// It watches the Session as the caller.
func (h *journeyHandler) follow(ctx context.Context, name string, at cursor, yield func(a2a.Event, error) bool) {
	_, err := h.observe(ctx, name, func(s *flowv1.Session) bool {
		events, last, final := eventsAfter(s, at)
		at = last
		for _, ev := range events {
			if !yield(ev, nil) {
				return true
			}
		}
		return final
	})
	if err != nil && ctx.Err() == nil {
		yield(nil, protocolError(err))
	}
}

// wait returns Session name once its events after cursor at end in a settled state,
// or as it is after maxWait.
func (h *journeyHandler) wait(ctx context.Context, name string, at cursor) (*flowv1.Session, error) {
	wctx, cancel := context.WithTimeout(ctx, h.maxWait)
	defer cancel()
	last, err := h.observe(wctx, name, func(s *flowv1.Session) bool {
		_, next, final := eventsAfter(s, at)
		at = next
		return final
	})
	if last != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return last, nil
	}
	return last, err
}

// observe calls done with Session name as it is, then with each change of it, until
// done returns true; it returns the last Session seen. It gets, then watches from the
// Session's resourceVersion, and gets again when a watch ends.
func (h *journeyHandler) observe(ctx context.Context, name string, done func(*flowv1.Session) bool) (*flowv1.Session, error) {
	var last *flowv1.Session
	for {
		s, err := h.session(ctx, name)
		if err != nil {
			return last, err
		}
		last = s
		if done(s) {
			return last, nil
		}
		w, err := h.c.Watch(ctx, &flowv1.SessionList{}, &client.ListOptions{
			Namespace:     h.namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: s.ResourceVersion},
		})
		if err != nil {
			return last, err
		}
		finished, err := func() (bool, error) {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return true, ctx.Err()
				case ev, ok := <-w.ResultChan():
					if !ok {
						return false, nil
					}
					switch ev.Type {
					case watch.Deleted:
						return true, fmt.Errorf("session %s was deleted: %w", name, a2a.ErrTaskNotFound)
					case watch.Added, watch.Modified:
						if s, ok := ev.Object.(*flowv1.Session); ok {
							last = s
							if done(s) {
								return true, nil
							}
						}
					case watch.Error:
						return false, nil
					}
				}
			}
		}()
		if finished {
			return last, err
		}
	}
}

// The gateway does not send push notifications.

func (h *journeyHandler) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *journeyHandler) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *journeyHandler) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *journeyHandler) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

// OnGetExtendedAgentCard: the public card is the whole card.
func (h *journeyHandler) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}

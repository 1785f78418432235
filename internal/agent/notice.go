package agent

import "context"

// Notice is something an agent learned about its endpoint that people are told once
// (as an Event on the Session whose call taught it): for example that the endpoint
// refuses native tools and an Auto agent now offers them in the prompt.
type Notice struct {
	// Reason is the Event's reason (a constant of api/v1alpha1), Message its note.
	Reason, Message string
}

type noticesKey struct{}

// WithNotices returns a context whose agents' notices are passed to notify.
func WithNotices(ctx context.Context, notify func(Notice)) context.Context {
	return context.WithValue(ctx, noticesKey{}, notify)
}

// Notify passes n to the context's notify function, if any.
func Notify(ctx context.Context, n Notice) {
	if notify, ok := ctx.Value(noticesKey{}).(func(Notice)); ok && notify != nil {
		notify(n)
	}
}

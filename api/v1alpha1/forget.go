package v1alpha1

// Erasure on request (`kubectl journey forget`): the plugin marks each Session it
// erases with these annotations and the erasure finalizer, then deletes it. The
// Session admission webhook stamps AnnotationForgetBy with the authenticated user who
// set AnnotationForget (a different name is refused), and the manager, holding the
// Sessions by the finalizer, writes one erasure record per request to its audit sink
// before it lets them go. No archive is written for a Session marked this way.
const (
	// AnnotationForget marks a Session to erase; its value identifies the erasure
	// request, shared by every Session one `forget` erases.
	AnnotationForget = "flow.journey.dev/forget"
	// AnnotationForgetBy is who asked for the erasure: set by the admission webhook
	// to the user who set AnnotationForget.
	AnnotationForgetBy = "flow.journey.dev/forget-by"
	// AnnotationForgetReason is why the Sessions are erased (`forget --reason`).
	AnnotationForgetReason = "flow.journey.dev/forget-reason"
	// FinalizerErasure holds a Session being erased until the manager has written the
	// erasure record of its request.
	FinalizerErasure = "flow.journey.dev/erasure"
)

// ForgetRequest is the erasure request the Session is marked with, "" for none.
func (s *Session) ForgetRequest() string { return s.Annotations[AnnotationForget] }

package webhook

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

var forgetByPath = field.NewPath("metadata", "annotations").Key(flowv1.AnnotationForgetBy)

// forgetChanged reports whether the update sets or changes the erasure request or
// who asked for it.
func forgetChanged(old, s *flowv1.Session) bool {
	return old.Annotations[flowv1.AnnotationForget] != s.Annotations[flowv1.AnnotationForget] ||
		old.Annotations[flowv1.AnnotationForgetBy] != s.Annotations[flowv1.AnnotationForgetBy]
}

// stampForget sets the forget-by annotation to the requesting user when the update
// marks the Session to erase; a forget-by naming someone else is refused, not
// overwritten, as for approvals.
func stampForget(old, s *flowv1.Session, user string) field.ErrorList {
	if !forgetChanged(old, s) || s.ForgetRequest() == "" {
		return checkForgetForgery(old, s, user)
	}
	if s.Annotations[flowv1.AnnotationForgetBy] == "" {
		s.Annotations[flowv1.AnnotationForgetBy] = user
	}
	return checkForgetForgery(old, s, user)
}

// checkForgetForgery refuses an update that sets or changes the erasure request or
// forget-by unless forget-by is the requesting user, and a forget-by without a request.
func checkForgetForgery(old, s *flowv1.Session, user string) field.ErrorList {
	if !forgetChanged(old, s) {
		return nil
	}
	by := s.Annotations[flowv1.AnnotationForgetBy]
	switch {
	case s.ForgetRequest() == "" && by != "":
		return field.ErrorList{field.Forbidden(forgetByPath, fmt.Sprintf(
			"is set only with the annotation %s, by the mutating webhook", flowv1.AnnotationForget))}
	case s.ForgetRequest() == "":
		return nil
	case user == "":
		return field.ErrorList{field.Forbidden(forgetByPath, "the request has no authenticated user to record as who asked for the erasure")}
	case by == "":
		return field.ErrorList{field.Forbidden(forgetByPath, "is empty: who asked for the erasure is stamped by the mutating webhook, which did not run")}
	case by != user:
		return field.ErrorList{field.Forbidden(forgetByPath, fmt.Sprintf(
			"erasure request forged: forget-by is %q but the request was made by %q; leave it unset, it is set to the authenticated user", by, user))}
	}
	return nil
}

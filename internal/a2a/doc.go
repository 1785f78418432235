// Package a2a is the A2A gateway: every Journey is an agent of the Agent2Agent protocol
// at /a2a/<namespace>/<journey>, with its agent card, built on the A2A Go SDK (its
// JSON-RPC transport and types). A task is a Session: message/send starts one or
// sends to one, tasks/cancel sets spec.cancel, message/stream and tasks/resubscribe
// stream its replies and states, with event ids derived from its status, so a stream
// resumes from any event on any replica. Callers authenticate with bearer tokens
// (TokenReview) and the gateway acts as them (impersonation): RBAC and the Session
// webhook decide what they may do. The gateway keeps no state of its own.
package a2a

// Package audit keeps what a compliance review asks of a Session's conversation: an
// audit trail that is never dropped (records derived from the status a step wrote,
// acknowledged by the sink before the Session moves on), archives of finished
// Sessions, erasure records, redaction of chosen patterns, and a cap on the
// manager's log verbosity so that no log line carries conversation text.
package audit

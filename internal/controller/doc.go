// Package controller holds the reconcilers of the flow.journey.dev API: Journeys
// (resolve their Pathways, validate the graph, pin each valid generation as a
// ControllerRevision), Pathways (check the CEL a Pathway holds on its own) and
// Sessions (one engine step per reconcile, at most one agent call, its answer
// journaled in status before the engine acts on it). The state machine itself is the
// pure package internal/engine; this package reads and writes the cluster around it.
package controller

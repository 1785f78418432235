package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
)

// Options configure the controllers.
type Options struct {
	// Agents builds agents; nil means DefaultAgents().
	Agents AgentFactory
	// Advance is how Running Sessions get their next step.
	Advance AdvanceMode
	// MaxConcurrentReconciles bounds parallel Session steps.
	MaxConcurrentReconciles int
}

// Setup registers the Journey, Pathway and Session controllers with mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	if err := (&PathwayReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&JourneyReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("journey-controller"),
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&SessionReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("session-controller"),
		Agents:                  opts.Agents,
		Advance:                 opts.Advance,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	}).SetupWithManager(mgr)
}

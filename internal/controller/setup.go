package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/audit"
	"github.com/journeyops/journey-operator/internal/budget"
	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision"
	"github.com/journeyops/journey-operator/internal/step"
	"github.com/journeyops/journey-operator/internal/tools"
	"github.com/journeyops/journey-operator/internal/tracing"
	"github.com/journeyops/journey-operator/internal/webhook"
)

// Options configure the controllers.
type Options struct {
	// Agents builds agents; nil means DefaultAgents().
	Agents AgentFactory
	// Advance is how Running Sessions get their next step.
	Advance AdvanceMode
	// MaxConcurrentReconciles bounds parallel Session steps.
	MaxConcurrentReconciles int
	// ShardSelector, when set, restricts this manager to the Sessions whose labels match
	// it. Give the manager's cache the same selector (CacheOptions) so Sessions of other
	// shards are not even held in memory.
	ShardSelector labels.Selector
	// Tools calls tools and lists tool servers; nil means a tools.Caller reading header
	// Secrets through the manager's API reader.
	Tools *tools.Caller
	// Tracing, when set, records a trace per Session (nil: no tracing, no cost).
	Tracing *tracing.Provider
	// Audit, when set, writes every Session's audit records, archives and
	// erasure records to its sink (nil: none, and status.audit is never set).
	Audit *audit.Trail
	// BudgetFlush is how often a Budget's status is written while its Sessions spend
	// (zero: DefaultBudgetFlush).
	BudgetFlush time.Duration
	// BudgetLease is how long this manager's lease of a slice of each Budget holds
	// after it is renewed (zero: budget.DefaultLease).
	BudgetLease time.Duration

	// ToolProgressInterval is how often, at most, the progress of a tool call in
	// flight is written to its Session (0: DefaultToolProgressInterval).
	ToolProgressInterval time.Duration

	// Clock, when set, is the Journey controller's clock, which times rollout steps
	// (nil: the real clock).
	Clock clock.PassiveClock

	// sessionEvents, in tests, replaces the Session controller's Event writer.
	sessionEvents events.EventRecorder
	// fault, in tests, is called at each point of a Session's step where a crash
	// could stop it (step.Loop.Fault), with the Session's key.
	fault func(ctx context.Context, session client.ObjectKey, at step.FaultPoint, eff *engine.Effect) error
}

// DefaultLeaderElectionID is the lease of an unsharded manager.
const DefaultLeaderElectionID = "journey-operator.flow.journey.dev"

// CacheOptions are the cache options the controllers are meant to run with: the
// Session informer restricted to shard (nil or empty: every Session), the
// ControllerRevision informer restricted to Journey revisions, managedFields dropped
// from every cached object (the controllers never read them, and on a Session written
// once per step they are a large share of the object), and Sessions cached as
// transformSession keeps them (cache.go).
func CacheOptions(shard labels.Selector) cache.Options {
	journeyRevisions := labels.NewSelector()
	if req, err := labels.NewRequirement(revision.LabelJourney, selection.Exists, nil); err == nil {
		journeyRevisions = journeyRevisions.Add(*req)
	}
	sessions := cache.ByObject{Transform: transformSession}
	if shard != nil && !shard.Empty() {
		sessions.Label = shard
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.ControllerRevision{}: {Label: journeyRevisions},
			&flowv1.Session{}:            sessions,
		},
	}
}

// LeaderElectionID is the lease name of a manager for shard: each shard elects its own
// leader, so the replicas of one shard are active/standby while shards run side by side.
func LeaderElectionID(shard labels.Selector) string {
	if shard == nil || shard.Empty() {
		return DefaultLeaderElectionID
	}
	sum := sha256.Sum256([]byte(shard.String()))
	return "shard-" + hex.EncodeToString(sum[:])[:10] + "." + DefaultLeaderElectionID
}

// Setup registers the Journey, Pathway and Session controllers with mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Tools == nil {
		opts.Tools = &tools.Caller{Secrets: mgr.GetAPIReader()}
	}
	// The tool caller closes its idle MCP sessions when the manager stops.
	if err := mgr.Add(opts.Tools); err != nil {
		return err
	}
	if err := (&PathwayReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&JourneyReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("journey-controller"),
		Tools: opts.Tools, Clock: opts.Clock,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	var sessionEvents events.EventRecorder = opts.sessionEvents
	if sessionEvents == nil {
		w := newEventWriter(mgr.GetClient(), mgr.GetScheme(), "session-controller")
		if err := mgr.Add(w); err != nil {
			return err
		}
		sessionEvents = w
	}
	ledger := budget.NewLedger(mgr.GetClient(), opts.ShardSelector)
	ledger.APIReader, ledger.Lease = mgr.GetAPIReader(), opts.BudgetLease
	if err := (&BudgetReconciler{Client: mgr.GetClient(), Ledger: ledger, Recorder: mgr.GetEventRecorder("budget-controller"),
		Flush: opts.BudgetFlush}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&SessionReconciler{
		Budgets:                 ledger,
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                sessionEvents,
		Agents:                  opts.Agents,
		Tools:                   opts.Tools,
		Advance:                 opts.Advance,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Shard:                   opts.ShardSelector,
		Tracing:                 opts.Tracing,
		Audit:                   opts.Audit,
		ToolProgressInterval:    opts.ToolProgressInterval,
		fault:                   opts.fault,
	}).SetupWithManager(mgr)
}

// AdmissionChecks are the checks the Journey and Pathway admission webhooks run: the
// ones this package's Journey and Pathway controllers report in Ready, so that what
// admission refuses and what the controllers call invalid say the same thing.
func AdmissionChecks() webhook.Checks {
	return webhook.Checks{Journey: engine.ValidateKnown, Pathway: PathwayIssues}
}

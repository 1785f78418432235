package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BudgetSpec is what a group of Sessions may spend in a window of time.
// +kubebuilder:validation:XValidation:rule="self.?onExhausted.orValue('Stall') != 'Degrade' || has(self.degradeTo)",message="onExhausted Degrade needs degradeTo.agent, the cheaper agent the Sessions switch to"
// +kubebuilder:validation:XValidation:rule="!has(self.degradeTo) || self.?onExhausted.orValue('Stall') == 'Degrade'",message="degradeTo is only used with onExhausted: Degrade"
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || self.?window.orValue('Day') in ['Day', 'Month']",message="timeZone applies to the Day and Month windows only; a duration window is counted in UTC from the Unix epoch"
type BudgetSpec struct {
	// selector picks the Sessions of the namespace the Budget covers: those
	// of the journeys it names and whose labels match matchLabels (both,
	// when both are set). Empty: every Session of the namespace.
	// +optional
	Selector BudgetSelector `json:"selector,omitempty,omitzero"`
	// window is the period the limits apply to: Day (from midnight), Month
	// (from the first day of the month, at midnight), both in timeZone, or
	// a duration such as 1h or 168h, counted from the Unix epoch in UTC.
	// What was spent in a window no longer counts once the next one starts.
	// Defaults to Day.
	// +optional
	// +kubebuilder:default=Day
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self in ['Day', 'Month'] || (self.matches('^([0-9]+(\\\\.[0-9]+)?(s|m|h))+$') && duration(self) >= duration('1m'))",message="window must be Day, Month or a duration of at least 1m such as 1h or 168h"
	Window string `json:"window,omitempty"`
	// timeZone is the IANA time zone of the Day and Month windows, for
	// example Europe/Berlin. Defaults to UTC.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
	// limits is what the selected Sessions may spend together in a window:
	// at least one of them. A model or tool call is made only when its worst
	// case fits in every limit of every Budget that selects its Session.
	// +required
	Limits BudgetLimits `json:"limits"`
	// softLimitPercent is the share of a limit after which the Budget's
	// SoftLimitReached condition turns True and a Warning Event is emitted;
	// calls go on until the limit itself. Defaults to 80.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	SoftLimitPercent *int32 `json:"softLimitPercent,omitempty"`
	// onExhausted is what a Session does when a call's worst case does not
	// fit: Stall (it waits, with the WaitingForBudget condition saying which
	// Budget, what the call could cost and what is left, and goes on by
	// itself when the window rolls over or a limit is raised) or Degrade (a
	// model call of a pathway with degrade: Allow is made with the agent of
	// degradeTo instead, when that fits; the Session's Degraded condition,
	// an Event and status.lastTurn.degradedTo say so. Other calls wait as
	// with Stall). Defaults to Stall.
	// +optional
	// +kubebuilder:validation:Enum=Stall;Degrade
	OnExhausted ExhaustedAction `json:"onExhausted,omitempty"`
	// degradeTo names the cheaper agent of onExhausted: Degrade. Only the
	// pathways with degrade: Allow switch to it, and only when it is an
	// openai agent of their Journey.
	// +optional
	DegradeTo *DegradeTarget `json:"degradeTo,omitempty"`
}

// BudgetSelector picks Sessions by journey and by label.
type BudgetSelector struct {
	// journeys are the names of the Journeys whose Sessions the Budget
	// covers. Empty: Sessions of any journey.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=253
	Journeys []string `json:"journeys,omitempty"`
	// matchLabels are labels a Session must carry, all of them, for the
	// Budget to cover it. Empty: Sessions with any labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// BudgetLimits are the limits of a Budget; an unset limit does not limit.
// +kubebuilder:validation:XValidation:rule="has(self.costUSD) || has(self.tokens) || has(self.toolCalls) || has(self.modelCalls)",message="set at least one of limits.costUSD, limits.tokens, limits.toolCalls and limits.modelCalls"
type BudgetLimits struct {
	// costUSD is the most the Sessions may spend, in US dollars, priced by
	// their agents' pricing. Agents without pricing cost nothing.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('[1-9]')",message="costUSD must be more than 0"
	CostUSD Decimal `json:"costUSD,omitempty"`
	// tokens is the most prompt plus completion tokens the Sessions may use.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Tokens int64 `json:"tokens,omitempty"`
	// toolCalls is the most tool calls the Sessions may make.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ToolCalls int64 `json:"toolCalls,omitempty"`
	// modelCalls is the most model calls (each remote agent of a pathway,
	// decision or intent classification) the Sessions may make.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ModelCalls int64 `json:"modelCalls,omitempty"`
}

// ExhaustedAction is what a Session does when a Budget has no room for its call.
type ExhaustedAction string

const (
	// ExhaustedStall: the Session waits until the Budget has room.
	ExhaustedStall ExhaustedAction = "Stall"
	// ExhaustedDegrade: the call is made with the Budget's degradeTo agent.
	ExhaustedDegrade ExhaustedAction = "Degrade"
)

// DegradeTarget is the agent Sessions switch to when a Budget has no room.
type DegradeTarget struct {
	// agent is the name of an agent of the Session's Journey (spec.agents).
	// A Journey without it is not degraded: its Sessions wait as with Stall.
	// +required
	Agent Name `json:"agent"`
}

// DegradePolicy is whether a pathway's model calls may run on a Budget's
// cheaper agent.
// +kubebuilder:validation:Enum=Allow;Never
type DegradePolicy string

const (
	// DegradeAllow: a Budget with onExhausted Degrade switches the calls.
	DegradeAllow DegradePolicy = "Allow"
	// DegradeNever: the Session waits for room.
	DegradeNever DegradePolicy = "Never"
)

// Degradation is a turn whose pathway ran on a Budget's degradeTo agent.
type Degradation struct {
	// budget is the Budget that had no room for the pathway's own agents.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Budget string `json:"budget"`
	// agent is the agent the calls were made with instead.
	// +required
	Agent Name `json:"agent"`
}

// BudgetAmounts are amounts of each thing a Budget limits.
type BudgetAmounts struct {
	// costUSD in US dollars, a decimal string.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
	// tokens, prompt plus completion.
	// +optional
	Tokens *int64 `json:"tokens,omitempty"`
	// toolCalls made.
	// +optional
	ToolCalls *int64 `json:"toolCalls,omitempty"`
	// modelCalls made.
	// +optional
	ModelCalls *int64 `json:"modelCalls,omitempty"`
}

// BudgetStatus is what the selected Sessions spent in the current window.
type BudgetStatus struct {
	// observedGeneration is the metadata.generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// windowStart is when the current window started.
	// +optional
	WindowStart *metav1.Time `json:"windowStart,omitempty"`
	// windowEnd is when the current window ends and the next one starts.
	// +optional
	WindowEnd *metav1.Time `json:"windowEnd,omitempty"`
	// spent is what the calls answered in the current window cost: the sum of
	// the selected Sessions' status.budgets entries for this window. It is
	// written in batches, so it may lag the manager's ledger by a few
	// seconds; it never passes a limit.
	// +optional
	Spent BudgetAmounts `json:"spent,omitempty,omitzero"`
	// reserved is the worst case of the calls being made now, which the
	// ledger holds until their answers settle.
	// +optional
	Reserved BudgetAmounts `json:"reserved,omitempty,omitzero"`
	// remaining is each limit less spent and reserved.
	// +optional
	Remaining BudgetAmounts `json:"remaining,omitempty,omitzero"`
	// sessions counts the Sessions that spent in the current window.
	// +optional
	Sessions int32 `json:"sessions,omitempty"`
	// holding counts the Sessions holding a reservation.
	// +optional
	Holding int32 `json:"holding,omitempty"`
	// waiting counts the Sessions waiting for room in this Budget.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
	// shards are the leases of the manager shards that run Sessions the
	// Budget selects, one entry per shard (one, with shard "*", for a
	// manager that runs every Session). Each shard makes calls only within
	// the slice of the limits it was granted here, reserving in memory, and
	// writes only its own entry; spent, reserved and the counts above are
	// the sums of the entries of the current window.
	// +optional
	// +listType=map
	// +listMapKey=shard
	// +kubebuilder:validation:MaxItems=64
	Shards []BudgetShard `json:"shards,omitempty"`
	// conditions: Ready (the Budget is valid and counted), SoftLimitReached
	// (a limit is past softLimitPercent) and Exhausted (a call of a selected
	// Session found no room).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BudgetShard is one manager shard's lease of a Budget in a window: the
// slice of the limits it may spend, and what its Sessions spent and hold.
type BudgetShard struct {
	// shard is the manager's --shard-selector, or "*" for a manager that
	// runs every Session.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Shard string `json:"shard"`
	// windowStart is the window the entry counts; an entry of another
	// window counts nothing.
	// +required
	WindowStart metav1.Time `json:"windowStart"`
	// granted is the slice of each limit the shard may spend in the window,
	// its settled spend included. The grants of the shards whose leases are
	// current never add up to more than a limit: a shard takes more only
	// from what no other shard holds, and gives back what it does not use
	// when its Sessions are idle.
	// +optional
	Granted BudgetAmounts `json:"granted,omitempty,omitzero"`
	// spent is what the shard's Sessions' answered calls cost in the window.
	// +optional
	Spent BudgetAmounts `json:"spent,omitempty,omitzero"`
	// reserved is the worst case of the shard's calls being made now.
	// +optional
	Reserved BudgetAmounts `json:"reserved,omitempty,omitzero"`
	// sessions counts the shard's Sessions that spent in the window.
	// +optional
	Sessions int32 `json:"sessions,omitempty"`
	// holding counts the shard's Sessions holding a reservation.
	// +optional
	Holding int32 `json:"holding,omitempty"`
	// waiting counts the shard's Sessions waiting for room.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
	// renewTime is when the shard last renewed its lease. A shard that
	// could not renew within two thirds of leaseSeconds makes no new call;
	// once leaseSeconds have passed, other shards may take the part of its
	// grant it did not spend.
	// +required
	RenewTime metav1.MicroTime `json:"renewTime"`
	// leaseSeconds is how long the lease holds after renewTime.
	// +required
	// +kubebuilder:validation:Minimum=1
	LeaseSeconds int32 `json:"leaseSeconds"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bud,categories=journeyops
// +kubebuilder:printcolumn:name="Spent",type=string,JSONPath=`.status.spent.costUSD`
// +kubebuilder:printcolumn:name="Limit",type=string,JSONPath=`.spec.limits.costUSD`
// +kubebuilder:printcolumn:name="Window",type=string,JSONPath=`.spec.window`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Budget caps what a group of Sessions spends together in a window of time:
// cost, tokens, tool calls and model calls. Each call reserves its worst case
// in every Budget that selects its Session before it is made, and its real
// usage settles the reservation when the answer is written; a call that does
// not fit is not made.
type Budget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the selected Sessions may spend.
	// +required
	Spec BudgetSpec `json:"spec"`
	// status is what they spent in the current window.
	// +optional
	Status BudgetStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// BudgetList contains a list of Budget.
type BudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Budgets.
	Items []Budget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Budget{}, &BudgetList{})
}

package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Shared Budgets (kind Budget): the step is told, in Input.Budgets, how much room
// each Budget that selects the Session has left, as the manager's ledger counts it.
// A call whose worst case does not fit in one of them is not made: the Session
// waits, its turn in progress, with WaitingForBudget naming the Budget, and the
// next step tries again (the ledger wakes it when room frees up, the window rolls
// over or a limit is raised). The ledger, not the engine, makes the reservation
// atomic across Sessions: the step package reserves WorstCase before it performs
// the call and, when the ledger refuses, steps again with the rooms it answered,
// so the engine says why. The answer's real usage is charged (Charge) in the write
// that journals it: status.budgets is what the ledger is rebuilt from.

// Spend is an amount of what a Budget limits: cost in billionths of a US dollar,
// tokens (prompt plus completion), tool calls and model calls.
type Spend struct {
	CostNano, Tokens, ToolCalls, ModelCalls int64
}

// Add returns s plus o.
func (s Spend) Add(o Spend) Spend {
	return Spend{s.CostNano + o.CostNano, s.Tokens + o.Tokens, s.ToolCalls + o.ToolCalls, s.ModelCalls + o.ModelCalls}
}

// Sub returns s less o.
func (s Spend) Sub(o Spend) Spend {
	return Spend{s.CostNano - o.CostNano, s.Tokens - o.Tokens, s.ToolCalls - o.ToolCalls, s.ModelCalls - o.ModelCalls}
}

// IsZero reports whether s is nothing.
func (s Spend) IsZero() bool { return s == Spend{} }

// Fits reports whether need fits in left for every amount limit sets (a zero amount
// of limit does not limit), and which one does not, by its Budget field name.
func Fits(need, left, limit Spend) (field string, ok bool) {
	for _, c := range []struct {
		name              string
		need, left, limit int64
	}{
		{"costUSD", need.CostNano, left.CostNano, limit.CostNano},
		{"tokens", need.Tokens, left.Tokens, limit.Tokens},
		{"modelCalls", need.ModelCalls, left.ModelCalls, limit.ModelCalls},
		{"toolCalls", need.ToolCalls, left.ToolCalls, limit.ToolCalls},
	} {
		if c.limit > 0 && c.need > c.left {
			return c.name, false
		}
	}
	return "", true
}

// BudgetRoom is a Budget that selects the Session, as the step sees it.
type BudgetRoom struct {
	// Name is the Budget's name.
	Name string
	// WindowStart and WindowEnd bound the Budget's current window.
	WindowStart, WindowEnd time.Time
	// Limit is the Budget's limits; a zero amount does not limit.
	Limit Spend
	// Left is what is left of each limit: the limit less what the window's answered
	// calls spent and what calls being made now hold. It may be negative when a
	// limit was lowered.
	Left Spend
	// DegradeTo is the agent of a Budget with onExhausted: Degrade (empty for
	// Stall): a pathway model call it has no room for is made with that agent,
	// when the pathway allows it and the smaller call fits.
	DegradeTo string
}

// WorstCase is the most eff can spend: for model calls, worstCase's tokens and cost
// and one model call per remote agent (a pipeline's agents summed); for a tool call,
// one tool call and the tokens and cost of its sampling's worst case.
func WorstCase(eff *Effect) Spend {
	if eff.Kind == flowv1.EffectCallTool {
		if eff.Tool != nil {
			return toolWorstCase(eff.Tool.Sampling)
		}
		return Spend{ToolCalls: 1}
	}
	tokens, cost := worstCase(eff)
	return Spend{CostNano: cost, Tokens: tokens, ModelCalls: remoteAgents(eff)}
}

// Spent is what eff spent, by the answer rec journals: its usage, and the calls it
// made (every remote agent of a model call, as WorstCase counts them; one tool call).
func Spent(eff *Effect, rec *flowv1.EffectRecord) Spend {
	u := rec.Result.Usage
	cost, _ := parseNano(u.CostUSD)
	s := Spend{CostNano: cost, Tokens: u.PromptTokens + u.CompletionTokens}
	if eff.Kind == flowv1.EffectCallTool {
		s.ToolCalls = 1
	} else {
		s.ModelCalls = remoteAgents(eff)
	}
	return s
}

func remoteAgents(eff *Effect) int64 {
	var n int64
	for _, a := range eff.Agents {
		if a.Provider == flowv1.ProviderOpenAI {
			n++
		}
	}
	return n
}

// Charge adds spent to the Session's status.budgets entry of each Budget in rooms,
// in the Budget's current window (an entry of an earlier window starts again from
// nothing). Entries of Budgets no longer in rooms are dropped: the Session is no
// longer theirs. It is called in the write that journals the answer that spent it.
func Charge(status *flowv1.SessionStatus, rooms []BudgetRoom, spent Spend) {
	if len(rooms) == 0 && len(status.Budgets) == 0 {
		return
	}
	out := make([]flowv1.BudgetCharge, 0, len(rooms))
	for _, b := range rooms {
		start := metav1.NewTime(b.WindowStart.UTC().Truncate(time.Second))
		var had Spend
		if i := slices.IndexFunc(status.Budgets, func(c flowv1.BudgetCharge) bool { return c.Name == b.Name }); i >= 0 && status.Budgets[i].WindowStart.Equal(&start) {
			had = ChargeSpend(status.Budgets[i])
		}
		out = append(out, chargeOf(b.Name, start, had.Add(spent)))
	}
	status.Budgets = out
	if len(out) == 0 {
		status.Budgets = nil
	}
}

// ChargeSpend is what entry c of status.budgets says the Session spent.
func ChargeSpend(c flowv1.BudgetCharge) Spend {
	cost, _ := parseNano(c.CostUSD)
	return Spend{CostNano: cost, Tokens: c.Tokens, ToolCalls: c.ToolCalls, ModelCalls: c.ModelCalls}
}

func chargeOf(name string, start metav1.Time, s Spend) flowv1.BudgetCharge {
	c := flowv1.BudgetCharge{Name: name, WindowStart: start, Tokens: s.Tokens, ToolCalls: s.ToolCalls, ModelCalls: s.ModelCalls}
	if s.CostNano > 0 {
		c.CostUSD = formatNano(s.CostNano)
	}
	return c
}

// FormatCost writes a cost in billionths of a dollar as a decimal string of US dollars.
func FormatCost(nano int64) string { return formatNano(nano) }

// ParseCost reads a decimal string of US dollars in billionths of a dollar.
func ParseCost(s string) (int64, bool) { return parseNano(s) }

// budgetWait is the Budget a step's call waits for.
type budgetWait struct{ name, message string }

// noRoom reports the first Budget of the step's input that has no room for need, and
// why, in words a person understands.
func (r *run) noRoom(kind flowv1.EffectKind, need Spend) (*budgetWait, bool) {
	for _, b := range r.in.Budgets {
		field, ok := Fits(need, b.Left, b.Limit)
		if ok {
			continue
		}
		return &budgetWait{name: b.Name, message: roomMessage(b, kind, field, need)}, true
	}
	return nil, false
}

// roomMessage says that Budget b has no room in field for a call of kind needing need.
func roomMessage(b BudgetRoom, kind flowv1.EffectKind, field string, need Spend) string {
	var could, left, limit string
	switch field {
	case "costUSD":
		could, left, limit = "cost up to USD "+formatNano(need.CostNano), "USD "+formatNano(max(b.Left.CostNano, 0)), "USD "+formatNano(b.Limit.CostNano)
	case "tokens":
		could, left, limit = fmt.Sprintf("use up to %d tokens", need.Tokens), fmt.Sprintf("%d tokens", max(b.Left.Tokens, 0)), fmt.Sprintf("%d tokens", b.Limit.Tokens)
	case "modelCalls":
		could, left, limit = "make "+calls(need.ModelCalls, "model call"), calls(max(b.Left.ModelCalls, 0), "model call"), calls(b.Limit.ModelCalls, "model call")
	default:
		could, left, limit = "make a tool call", calls(max(b.Left.ToolCalls, 0), "tool call"), calls(b.Limit.ToolCalls, "tool call")
	}
	return fmt.Sprintf("Budget %s has no room for the next %s call, which could %s: %s of its limit of %s is left in the window until %s; "+
		"the session goes on by itself when the window rolls over or the limit is raised (kubectl journey budget %s)",
		b.Name, kind, could, left, limit, b.WindowEnd.UTC().Format(time.RFC3339), b.Name)
}

// calls is n calls of what, in words.
func calls(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Degrade returns eff, a model call of a pathway with degrade: Allow, with its remote
// agents replaced by agent to, an openai agent of the journey; ok is false when eff
// cannot be degraded so (another kind of call, a pathway that does not allow it, an
// agent that is not an openai agent of the journey, or nothing to replace). The
// question is the same, so is the input hash: a journaled answer of the degraded
// call answers the call.
func (s *Snapshot) Degrade(eff *Effect, to string) (*Effect, bool) {
	if to == "" || eff.Kind != flowv1.EffectRunPathway || eff.Pathway == nil {
		return nil, false
	}
	if p := s.pathways[eff.Pathway.Pathway]; p == nil || p.Degrade != flowv1.DegradeAllow {
		return nil, false
	}
	cheap, remote := s.resolveAgent(to)
	if !remote {
		return nil, false
	}
	agents, changed := slices.Clone(eff.Agents), false
	for i, a := range agents {
		if a.Provider == flowv1.ProviderOpenAI && a.Name != cheap.Name {
			agents[i], changed = cheap, true
		}
	}
	if !changed {
		return nil, false
	}
	return newEffect(eff.Kind, agents, eff.Pipeline, *eff.Pathway), true
}

// degrade returns eff on a cheaper agent when every Budget without room for it has
// onExhausted: Degrade (the agent of the first of them, by name) and eff's pathway
// allows it, with that Budget; ok is false otherwise.
func (r *run) degrade(eff *Effect) (*Effect, BudgetRoom, bool) {
	need := WorstCase(eff)
	var by *BudgetRoom
	for i := range r.in.Budgets {
		b := &r.in.Budgets[i]
		if _, ok := Fits(need, b.Left, b.Limit); ok {
			continue
		}
		if b.DegradeTo == "" {
			return nil, BudgetRoom{}, false // a Budget that stalls has the last word
		}
		if by == nil {
			by = b
		}
	}
	if by == nil {
		return nil, BudgetRoom{}, false
	}
	d, ok := r.snap.Degrade(eff, by.DegradeTo)
	return d, *by, ok
}

// replayDegraded is, in a replay, eff made again on the agent the journal says the
// Session made it with (Input.ReplayDegraded), with that Budget; ok is false outside
// a replay, for another kind of call, or when this revision cannot degrade eff so
// (the replay then finds the journaled answer does not apply).
func (r *run) replayDegraded(kind flowv1.EffectKind, eff *Effect) (*Effect, BudgetRoom, bool) {
	g := r.in.ReplayDegraded
	if g == nil || kind != flowv1.EffectRunPathway {
		return nil, BudgetRoom{}, false
	}
	d, ok := r.snap.Degrade(eff, string(g.Agent))
	return d, BudgetRoom{Name: g.Budget, DegradeTo: string(g.Agent)}, ok
}

// degraded records that the pathway's call eff runs as d, on Budget b's degradeTo
// agent: in the call's record, the turn and the Degraded condition (an Event when it
// turns True).
func (r *run) degraded(b BudgetRoom, eff, d *Effect) {
	d.DegradedTo = &flowv1.Degradation{Budget: b.Name, Agent: flowv1.Name(b.DegradeTo)}
	if lt := r.st.LastTurn; lt != nil {
		lt.DegradedTo = d.DegradedTo.DeepCopy()
	}
	setCondition(r.st, flowv1.ConditionDegraded, metav1.ConditionTrue, flowv1.ReasonDegraded, fmt.Sprintf(
		"Budget %s has no room for the calls of pathway %s with agent %s; they are made with agent %s (onExhausted: Degrade) until it has room (kubectl journey budget %s)",
		b.Name, r.st.CurrentPathway, agentNames(eff), agentNames(d), b.Name), r.now)
}

// agentNames are the names of eff's remote agents, comma-separated, each once.
func agentNames(eff *Effect) string {
	var names []string
	for _, a := range eff.Agents {
		if a.Provider == flowv1.ProviderOpenAI && !slices.Contains(names, string(a.Name)) {
			names = append(names, string(a.Name))
		}
	}
	return strings.Join(names, ", ")
}

// waitForBudget stops the step before a call Budget w has no room for: the turn stays
// in progress, nothing is spent, and the Session says what it waits for.
func (r *run) waitForBudget(w *budgetWait) stageResult {
	r.budgetWait = w
	return stageResult{pause: true}
}

// budgetConditions sets WaitingForBudget while the step waits for a Budget, and
// removes it otherwise. It reports the reason and message of a wait, for Ready.
func (r *run) budgetConditions() (reason, msg string, waiting bool) {
	if w := r.budgetWait; w != nil {
		setCondition(r.st, flowv1.ConditionWaitingForBudget, metav1.ConditionTrue, flowv1.ReasonBudgetExhausted, w.message, r.now)
		return flowv1.ReasonBudgetExhausted, w.message, true
	}
	apimeta.RemoveStatusCondition(&r.st.Conditions, flowv1.ConditionWaitingForBudget)
	return "", "", false
}

// IsWaitingForBudget reports whether a Session's status says it waits for room in a
// Budget.
func IsWaitingForBudget(st *flowv1.SessionStatus) bool {
	return apimeta.IsStatusConditionTrue(st.Conditions, flowv1.ConditionWaitingForBudget)
}

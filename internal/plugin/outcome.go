package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1alpha1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

const outcomeExample = `  # Report that the External pathway "test" succeeded in the Session's current iteration
  kubectl journey outcome deploy-42 --pathway test --result success

  # Report a partial success with data; values that are valid JSON keep their type
  kubectl journey outcome deploy-42 --pathway test --result partial_success \
    --data failures=3 --data flaky=true --data 'suites=["api","ui"]' --data owner=team-a \
    --message "3 of 120 tests failed"

  # Answer for a specific iteration
  kubectl journey outcome deploy-42 --pathway test --result failure --iteration 2`

var resultTypes = []flowv1alpha1.ResultType{
	flowv1alpha1.ResultSuccess, flowv1alpha1.ResultFailure, flowv1alpha1.ResultPartialSuccess, flowv1alpha1.ResultUnclear,
}

type outcomeOptions struct {
	*Options
	pathway   string
	result    string
	iteration int32
	data      []string
	message   string
}

func newOutcomeCommand(o *Options) *cobra.Command {
	oo := &outcomeOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "outcome SESSION --pathway PATHWAY --result RESULT",
		Short: "Post the result of an External pathway to a Session",
		Long: `Append an outcome to spec.outcomes of a Session, for a pathway whose executor is
External: the Session waits in that pathway until an outcome for it and the current
iteration arrives.

--result is success, failure, partial_success or unclear. --iteration defaults to the
Session's status.iteration; an outcome for another iteration is ignored by the operator.
Each --data key=value becomes a field of the outcome's data; a value that is valid JSON
(a number, true/false, null, a list or an object) keeps its type, anything else is a
string.`,
		Example: outcomeExample,
		Args:    exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oo.run(cmd.Context(), args[0], cmd.Flags().Changed("iteration"))
		},
	}
	cmd.Flags().StringVar(&oo.pathway, "pathway", "", "External pathway the outcome is for (required)")
	cmd.Flags().StringVar(&oo.result, "result", "", "Result type: success, failure, partial_success or unclear (required)")
	cmd.Flags().Int32Var(&oo.iteration, "iteration", 0, "Iteration the outcome is for (default status.iteration)")
	cmd.Flags().StringArrayVar(&oo.data, "data", nil, "Output key=value, repeatable; JSON values keep their type")
	cmd.Flags().StringVar(&oo.message, "message", "", "Human-readable summary")
	_ = cmd.MarkFlagRequired("pathway")
	_ = cmd.MarkFlagRequired("result")
	_ = cmd.RegisterFlagCompletionFunc("result", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(resultTypes))
		for i, r := range resultTypes {
			out[i] = string(r)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func (oo *outcomeOptions) run(ctx context.Context, name string, iterationSet bool) error {
	result, err := ParseResultType(oo.result)
	if err != nil {
		return err
	}
	if oo.pathway == "" {
		return errors.New("--pathway must name the External pathway")
	}
	if iterationSet && oo.iteration < 1 {
		return fmt.Errorf("--iteration must be 1 or more, got %d", oo.iteration)
	}
	if len(oo.message) > 4096 {
		return fmt.Errorf("--message is %d characters; at most 4096 are kept", len(oo.message))
	}
	data, err := ParseData(oo.data)
	if err != nil {
		return err
	}
	key, err := oo.sessionKey(name)
	if err != nil {
		return err
	}
	c, err := oo.NewClient()
	if err != nil {
		return err
	}
	var out flowv1alpha1.ExternalOutcome
	s, err := appendToSession(ctx, c, key, "outcomes", func(s *flowv1alpha1.Session) (any, error) {
		if err := acceptsInput(s); err != nil {
			return nil, err
		}
		if err := knownPathway(ctx, c, s, oo.pathway); err != nil {
			return nil, err
		}
		out = flowv1alpha1.ExternalOutcome{
			Pathway:    flowv1alpha1.Name(oo.pathway),
			Iteration:  oo.iteration,
			ResultType: result,
			Data:       data,
			Message:    oo.message,
		}
		if !iterationSet {
			out.Iteration = max(s.Status.Iteration, 1)
		}
		out.Attempt = nextAttempt(s.Spec.Outcomes, out.Pathway, out.Iteration)
		return out, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(oo.Out, "outcome %s for pathway %s (iteration %d) sent to session/%s\n", out.ResultType, out.Pathway, out.Iteration, name)
	if cur := s.Status.CurrentPathway; cur != "" && cur != oo.pathway {
		fmt.Fprintf(oo.ErrOut, "warning: session/%s is in pathway %s, not %s; the next time it waits in an External pathway other than %s, this outcome is discarded\n", name, cur, oo.pathway, oo.pathway)
	}
	if it := s.Status.Iteration; it > 0 && it != out.Iteration {
		fmt.Fprintf(oo.ErrOut, "warning: session/%s is in iteration %d; an outcome for iteration %d is ignored\n", name, it, out.Iteration)
	}
	return nil
}

// knownPathway refuses an outcome for a pathway the Session's Journey does not have:
// the operator would discard it. When the Journey cannot be read there is nothing to
// check against, and the outcome is sent.
func knownPathway(ctx context.Context, c client.Client, s *flowv1alpha1.Session, pathway string) error {
	if err := journeyHasPathway(ctx, c, s, pathway); err != nil {
		return fmt.Errorf("--%w; the operator would discard the outcome", err)
	}
	return nil
}

// nextAttempt is the attempt of a new outcome for pathway and iteration: one more than
// the outcomes already sent for them (outcomes are keyed by all three).
func nextAttempt(outcomes []flowv1alpha1.ExternalOutcome, pathway flowv1alpha1.Name, iteration int32) int32 {
	attempt := int32(1)
	for _, o := range outcomes {
		if o.Pathway == pathway && o.Iteration == iteration {
			attempt = max(attempt, max(o.Attempt, 1)+1)
		}
	}
	return attempt
}

// ParseResultType accepts the four result types (and their dashed spellings).
func ParseResultType(s string) (flowv1alpha1.ResultType, error) {
	norm := flowv1alpha1.ResultType(strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_"))
	for _, r := range resultTypes {
		if norm == r {
			return r, nil
		}
	}
	names := make([]string, len(resultTypes))
	for i, r := range resultTypes {
		names[i] = string(r)
	}
	return "", fmt.Errorf("--result %q is not a result type; use one of %s", s, strings.Join(names, ", "))
}

// ParseData turns key=value pairs into a JSON object. A value that parses as JSON keeps
// its JSON type; anything else is a string. Keys must be unique and non-empty.
func ParseData(pairs []string) (*apiextensionsv1.JSON, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	obj := make(map[string]json.RawMessage, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--data %q must be key=value", p)
		}
		if _, dup := obj[k]; dup {
			return nil, fmt.Errorf("--data key %q given twice", k)
		}
		obj[k] = dataValue(v)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return &apiextensionsv1.JSON{Raw: raw}, nil
}

// dataValue is v as JSON: itself when it is a valid JSON value, else a JSON string.
func dataValue(v string) json.RawMessage {
	trimmed := bytes.TrimSpace([]byte(v))
	if len(trimmed) > 0 && json.Valid(trimmed) {
		var compact bytes.Buffer
		if json.Compact(&compact, trimmed) == nil {
			return compact.Bytes()
		}
	}
	s, _ := json.Marshal(v)
	return s
}

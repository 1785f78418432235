package builtin

import (
	"fmt"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/expr"
)

// CallTool answers a call to a builtin tool: its CEL expression over args and context.
// It is pure; an expression that fails is an Invalid agent.Error with source Tool.
func CallTool(req agent.ToolRequest) (agent.ToolResponse, error) {
	if req.Builtin == "" {
		return agent.ToolResponse{}, &agent.Error{Class: agent.Terminal, Source: flowv1.FailureTool, Kind: flowv1.FailureValidation,
			Agent: req.Tool, Err: fmt.Errorf("tool %s is served by an MCP server, not builtin", req.Tool)}
	}
	v, err := eval(string(req.Builtin), expr.Vars{Args: req.Args, Context: req.Context}.Activation())
	if err != nil {
		return agent.ToolResponse{}, &agent.Error{Class: agent.Invalid, Source: flowv1.FailureTool, Kind: flowv1.FailureValidation,
			Agent: req.Tool, Err: fmt.Errorf("tool %s: %w", req.Tool, err)}
	}
	return agent.ToolResponse{Result: v}, nil
}

// ToolArgs evaluates a builtin tool call's arguments expression (default {}): an
// object over message, context, inputs, session and tools.
func ToolArgs(src flowv1.Expression, req agent.PathwayRequest) (map[string]any, error) {
	if src == "" {
		return map[string]any{}, nil
	}
	v, err := eval(string(src), expr.Vars{
		Context: req.Context, Message: req.Message, Inputs: req.Inputs,
		Session: SessionVars(req.Session), Tools: req.Tools,
	}.Activation())
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("CEL %q: want an object of arguments, got %T", src, v)
	}
	return m, nil
}

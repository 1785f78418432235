package engine

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// resolveToolSchemas compiles the pinned input schemas of server tools. A schema that
// does not parse or resolve is left out: the server checks the arguments itself.
func resolveToolSchemas(tools map[string]ToolInfo) map[string]*jsonschema.Resolved {
	out := map[string]*jsonschema.Resolved{}
	for name, t := range tools {
		if len(t.InputSchema) == 0 {
			continue
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(t.InputSchema, &s); err != nil {
			continue
		}
		if rs, err := s.Resolve(nil); err == nil {
			out[name] = rs
		}
	}
	return out
}

// validateArgs checks args against the input schema the revision pins for tool, when
// there is one.
func (s *Snapshot) validateArgs(tool string, args map[string]any) error {
	rs, ok := s.toolSchemas[tool]
	if !ok {
		return nil
	}
	if err := rs.Validate(orEmptyMap(args)); err != nil {
		return fmt.Errorf("tool %s: the arguments do not match its input schema: %w", tool, err)
	}
	return nil
}

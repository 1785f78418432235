// Package revdata is what a Journey ControllerRevision holds, and how it is read back:
// the stored form that internal/revision names, encodes and compiles into the engine's
// Snapshot. It depends on the API types alone, so that the admission webhook reads a
// Session's pinned revision the way the controllers do without depending on the engine.
package revdata

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Data is what a Journey ControllerRevision holds: the Journey spec and the resolved
// Pathway specs by local name. Sessions pin one, so editing a Journey or a Pathway
// never changes a running Session.
type Data struct {
	Journey  flowv1.JourneySpec             `json:"journey"`
	Pathways map[string]*flowv1.PathwaySpec `json:"pathways"`
	// Tools pins the server tools as their servers listed them, by tool name in the
	// journey, so a running Session never sees a tool change under it.
	Tools map[string]*ToolSchema `json:"tools,omitempty"`
}

// ToolSchema is a server tool as its server described it.
type ToolSchema struct {
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	ReadOnly    bool            `json:"readOnly,omitempty"`
	Destructive bool            `json:"destructive,omitempty"`
}

// Decode reads the stored data of the revision name.
func Decode(name string, raw []byte) (*Data, error) {
	var data Data
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("revision %s: %w", name, err)
	}
	return &data, nil
}

// Read returns the stored data of the ControllerRevision namespace/name. The error of
// the read is returned as it is (apierrors.IsNotFound works on it).
func Read(ctx context.Context, r client.Reader, namespace, name string) ([]byte, error) {
	var rev appsv1.ControllerRevision
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &rev); err != nil {
		return nil, err
	}
	return rev.Data.Raw, nil
}

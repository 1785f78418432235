package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/engine"
)

// RevisionData is what a Journey ControllerRevision holds: the Journey spec and the
// resolved Pathway specs by local name. Sessions pin one, so editing a Journey or a
// Pathway never changes a running Session.
type RevisionData struct {
	Journey  flowv1.JourneySpec             `json:"journey"`
	Pathways map[string]*flowv1.PathwaySpec `json:"pathways"`
}

// LabelJourney marks the ControllerRevisions of a Journey.
const LabelJourney = "flow.journey.dev/journey"

// RevisionName is <journey>-<content hash>: the same content always has the same name.
func RevisionName(journey string, raw []byte) string {
	sum := sha256.Sum256(raw)
	name := journey
	if len(name) > 52 {
		name = name[:52]
	}
	return name + "-" + hex.EncodeToString(sum[:])[:10]
}

// snapshotCache keeps compiled snapshots of revisions. Revisions are immutable, so an
// entry never goes stale; the cache is bounded.
type snapshotCache struct {
	mu    sync.Mutex
	cache *lru.Cache
}

func newSnapshotCache(size int) *snapshotCache {
	return &snapshotCache{cache: lru.New(size)}
}

// get returns the compiled snapshot of the ControllerRevision namespace/name.
func (c *snapshotCache) get(ctx context.Context, r client.Reader, namespace, name string) (*engine.Snapshot, error) {
	key := namespace + "/" + name
	c.mu.Lock()
	if s, ok := c.cache.Get(key); ok {
		c.mu.Unlock()
		return s.(*engine.Snapshot), nil
	}
	c.mu.Unlock()

	var rev appsv1.ControllerRevision
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &rev); err != nil {
		return nil, err
	}
	var data RevisionData
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("revision %s: %w", name, err)
	}
	snap, err := engine.NewSnapshot(name, &data.Journey, data.Pathways)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", name, err)
	}
	c.mu.Lock()
	c.cache.Add(key, snap)
	c.mu.Unlock()
	return snap, nil
}

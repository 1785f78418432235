// Package revision is the Journey snapshot format: how a Journey spec and the Pathway
// specs it resolves to become the data of an immutable ControllerRevision, the name
// that data gets, and how a revision is read back and compiled into the engine's
// Snapshot. The Journey controller writes revisions, the Session controller and the
// offline runner (journey tests, record and replay) read them, all through this package.
// The stored form itself, and reading it back, are in revdata, which does not depend
// on the engine: the admission webhook reads revisions through it.
package revision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/journeyops/journey-operator/internal/engine"
	"github.com/journeyops/journey-operator/internal/revision/revdata"
)

// Data is what a Journey ControllerRevision holds (revdata.Data).
type Data = revdata.Data

// ToolSchema is a server tool as its server described it (revdata.ToolSchema).
type ToolSchema = revdata.ToolSchema

// LabelJourney marks the ControllerRevisions of a Journey.
const LabelJourney = "flow.journey.dev/journey"

// Name is <journey>-<hash of canonical>: the same content always has the same name.
// canonical is what Canonical returns.
func Name(journey string, canonical []byte) string {
	sum := sha256.Sum256(canonical)
	name := journey
	if len(name) > 52 {
		name = name[:52]
	}
	return name + "-" + hex.EncodeToString(sum[:])[:10]
}

// Encode returns the stored form of data and the name of its revision of journey. The
// name hashes the canonical form of data (Canonical), so the same Journey written with
// other YAML formatting, key order, quoting or defaults left out names the same
// revision, in the cluster and in kubectl journey test alike.
//
// The Journey's spec.rollout and spec.upgradePolicy are left out: how a revision is
// rolled out and how running Sessions move between revisions are not part of what its
// Sessions run, so changing them makes no new revision.
func Encode(journey string, data *Data) (raw []byte, name string, err error) {
	if data.Journey.Rollout != nil || data.Journey.UpgradePolicy != "" {
		d := *data
		d.Journey.Rollout, d.Journey.UpgradePolicy = nil, ""
		data = &d
	}
	raw, err = json.Marshal(data)
	if err != nil {
		return nil, "", err
	}
	canonical, err := Canonical(data)
	if err != nil {
		return nil, "", err
	}
	return raw, Name(journey, canonical), nil
}

// Build turns revision data into the snapshot the Session controller runs, exactly as
// the controllers do: the data is stored as JSON (its hash names the revision) and read
// back before it is compiled. It returns the revision name.
func Build(journey string, data *Data) (*engine.Snapshot, string, error) {
	raw, name, err := Encode(journey, data)
	if err != nil {
		return nil, "", err
	}
	snap, err := Compile(name, raw)
	return snap, name, err
}

// Compile compiles the stored data of the revision name into a snapshot.
func Compile(name string, raw []byte) (*engine.Snapshot, error) {
	data, err := revdata.Decode(name, raw)
	if err != nil {
		return nil, err
	}
	snap, err := engine.NewSnapshot(name, &data.Journey, data.Pathways)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", name, err)
	}
	if len(data.Tools) > 0 {
		pinned := make(map[string]engine.ToolInfo, len(data.Tools))
		for n, t := range data.Tools {
			pinned[n] = engine.ToolInfo{Destructive: t.Destructive, ReadOnly: t.ReadOnly, InputSchema: t.InputSchema, Description: t.Description}
		}
		snap = snap.WithServerTools(pinned)
	}
	return snap, nil
}

// Cache keeps compiled snapshots of revisions. Revisions are immutable, so an entry
// never goes stale; the cache is bounded.
type Cache struct {
	mu    sync.Mutex
	cache *lru.Cache
}

// NewCache returns a cache of at most size snapshots.
func NewCache(size int) *Cache {
	return &Cache{cache: lru.New(size)}
}

// Get returns the compiled snapshot of the ControllerRevision namespace/name.
func (c *Cache) Get(ctx context.Context, r client.Reader, namespace, name string) (*engine.Snapshot, error) {
	key := namespace + "/" + name
	c.mu.Lock()
	if s, ok := c.cache.Get(key); ok {
		c.mu.Unlock()
		return s.(*engine.Snapshot), nil
	}
	c.mu.Unlock()

	raw, err := revdata.Read(ctx, r, namespace, name)
	if err != nil {
		return nil, err
	}
	snap, err := Compile(name, raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cache.Add(key, snap)
	c.mu.Unlock()
	return snap, nil
}

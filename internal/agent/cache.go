package agent

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// DefaultIntentCacheSize bounds an IntentCache created with a size <= 0.
const DefaultIntentCacheSize = 1024

// IntentCache remembers classified intents for a while (Journey
// spec.intentDetection.cacheTTL), so the same message asked against the same intents
// and model costs one LLM call. It holds at most size entries, evicting the least
// recently used, and an entry older than ttl is never returned. It is safe for
// concurrent use.
//
// It is a small container/list LRU rather than k8s.io/utils/lru: that one is untyped
// and takes its lock separately for Get and Remove, so expiring an entry on read
// could drop a fresh value added in between.
type IntentCache struct {
	size int
	ttl  time.Duration
	now  func() time.Time

	mu      sync.Mutex
	order   *list.List // front = most recently used; values are *cacheEntry
	entries map[string]*list.Element
}

type cacheEntry struct {
	key     string
	resp    IntentResponse
	expires time.Time
}

// NewIntentCache returns a cache of at most size entries (DefaultIntentCacheSize when
// size <= 0) that live for ttl (forever when ttl <= 0). now is the clock; nil means
// time.Now.
func NewIntentCache(size int, ttl time.Duration, now func() time.Time) *IntentCache {
	if size <= 0 {
		size = DefaultIntentCacheSize
	}
	if now == nil {
		now = time.Now
	}
	return &IntentCache{size: size, ttl: ttl, now: now, order: list.New(), entries: map[string]*list.Element{}}
}

// Get returns the cached answer for key, if present and not expired.
func (c *IntentCache) Get(key string) (IntentResponse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return IntentResponse{}, false
	}
	e := el.Value.(*cacheEntry)
	if !e.expires.IsZero() && !c.now().Before(e.expires) {
		c.order.Remove(el)
		delete(c.entries, key)
		return IntentResponse{}, false
	}
	c.order.MoveToFront(el)
	return e.resp, true
}

// Add stores resp under key for the cache's ttl, evicting the least recently used
// entry when full.
func (c *IntentCache) Add(key string, resp IntentResponse) {
	c.AddFor(key, resp, 0)
}

// AddFor stores resp under key for ttl (the cache's ttl when ttl <= 0), evicting the
// least recently used entry when full.
func (c *IntentCache) AddFor(key string, resp IntentResponse, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ttl <= 0 {
		ttl = c.ttl
	}
	var expires time.Time // zero: never expires
	if ttl > 0 {
		expires = c.now().Add(ttl)
	}
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		e.resp, e.expires = resp, expires
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, resp: resp, expires: expires})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}

// Len is the number of entries held, expired ones included until they are read or
// evicted.
func (c *IntentCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// IntentCacheKey identifies a classification: the model, the message and the intent
// set (names, descriptions and patterns, in order). The request's Context is not part
// of it: classifiers answer from the message and the intents alone.
func IntentCacheKey(model string, req IntentRequest) string {
	b, _ := json.Marshal(struct {
		Model   string   `json:"m"`
		Message string   `json:"t"`
		Intents []Intent `json:"i"`
	}{model, req.Message, req.Intents})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CachedClassifier wraps a so that ClassifyIntent answers from cache when it can.
// Only successful answers are cached (a "none" answer is one), for the request's
// CacheTTL (the journey's intentDetection.cacheTTL) or the cache's default; a hit reports zero
// usage, since no tokens were spent. model distinguishes agents sharing a cache.
// RunPathway and Decide pass through.
func CachedClassifier(a Agent, cache *IntentCache, model string) Agent {
	return &cachedClassifier{Agent: a, cache: cache, model: model}
}

type cachedClassifier struct {
	Agent
	cache *IntentCache
	model string
}

func (c *cachedClassifier) ClassifyIntent(ctx context.Context, req IntentRequest) (IntentResponse, error) {
	key := IntentCacheKey(c.model, req)
	if resp, ok := c.cache.Get(key); ok {
		resp.Usage = Usage{}
		return resp, nil
	}
	resp, err := c.Agent.ClassifyIntent(ctx, req)
	if err == nil {
		c.cache.AddFor(key, resp, req.CacheTTL)
	}
	return resp, err
}

// Sample passes a tool server's sampling request to the wrapped agent.
func (c *cachedClassifier) Sample(ctx context.Context, req SampleRequest) (SampleResponse, error) {
	s, ok := c.Agent.(Sampler)
	if !ok {
		return SampleResponse{}, fmt.Errorf("agent %T cannot answer sampling requests", c.Agent)
	}
	return s.Sample(ctx, req)
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// countingClassifier answers intent "faq" (or err) and counts calls.
func countingClassifier(t *testing.T, calls *int, err error) *fakeAgent {
	return &fakeAgent{t: t, classify: func(_ context.Context, req IntentRequest) (IntentResponse, error) {
		*calls++
		if err != nil {
			return IntentResponse{Intent: NoIntent, Usage: tokens(3)}, err
		}
		return IntentResponse{Intent: "faq", Confidence: 0.9, Usage: tokens(3)}, nil
	}}
}

var faqIntents = []Intent{{Name: "faq", Description: "a question", Patterns: []string{"what is"}}, {Name: "booking"}}

func TestCachedClassifierHitsAndExpires(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	cache := NewIntentCache(16, 5*time.Minute, clock.Now)
	calls := 0
	c := CachedClassifier(countingClassifier(t, &calls, nil), cache, "gpt-4o-mini")
	ctx := context.Background()
	req := IntentRequest{Message: "What is a referral?", Intents: faqIntents}

	first, err := c.ClassifyIntent(ctx, req)
	if err != nil || first.Intent != "faq" || first.Usage != tokens(3) || calls != 1 {
		t.Fatalf("first call = %+v, %v after %d calls", first, err, calls)
	}
	clock.Advance(4*time.Minute + 59*time.Second)
	hit, err := c.ClassifyIntent(ctx, req)
	if err != nil || hit.Intent != "faq" || hit.Confidence != 0.9 || calls != 1 {
		t.Fatalf("second call = %+v, %v after %d calls; want a hit", hit, err, calls)
	}
	if hit.Usage != (Usage{}) {
		t.Errorf("a hit reports usage %+v, want none", hit.Usage)
	}
	// The entry expires ttl after it was stored, not after it was last read.
	clock.Advance(time.Second)
	if _, err := c.ClassifyIntent(ctx, req); err != nil || calls != 2 {
		t.Errorf("after the TTL: %d calls, want 2", calls)
	}
	if _, _ = c.ClassifyIntent(ctx, req); calls != 2 {
		t.Errorf("the refreshed entry was not cached: %d calls", calls)
	}
}

// The journey's cacheTTL, carried by the request, overrides the cache's default.
func TestCachedClassifierRequestTTL(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	cache := NewIntentCache(16, 5*time.Minute, clock.Now)
	calls := 0
	c := CachedClassifier(countingClassifier(t, &calls, nil), cache, "gpt-4o-mini")
	ctx := context.Background()
	req := IntentRequest{Message: "What is a referral?", Intents: faqIntents, CacheTTL: 30 * time.Second}
	if _, err := c.ClassifyIntent(ctx, req); err != nil || calls != 1 {
		t.Fatalf("first call: %v after %d calls", err, calls)
	}
	clock.Advance(29 * time.Second)
	if _, _ = c.ClassifyIntent(ctx, req); calls != 1 {
		t.Errorf("within the request's TTL: %d calls, want a hit", calls)
	}
	clock.Advance(time.Second)
	if _, _ = c.ClassifyIntent(ctx, req); calls != 2 {
		t.Errorf("after the request's 30s TTL (cache default 5m): %d calls, want 2", calls)
	}
	long := req
	long.Message = "Why?"
	long.CacheTTL = time.Hour
	_, _ = c.ClassifyIntent(ctx, long)
	clock.Advance(59 * time.Minute)
	if _, _ = c.ClassifyIntent(ctx, long); calls != 3 {
		t.Errorf("a 1h TTL expired after 59m (cache default 5m): %d calls, want 3", calls)
	}
}

func TestCachedClassifierKey(t *testing.T) {
	cache := NewIntentCache(16, time.Hour, nil)
	calls := 0
	inner := countingClassifier(t, &calls, nil)
	ctx := context.Background()
	base := IntentRequest{Message: "What is a referral?", Intents: faqIntents}
	_, _ = CachedClassifier(inner, cache, "m1").ClassifyIntent(ctx, base)

	withContext := base
	withContext.Context = map[string]any{"x": 1}
	if _, _ = CachedClassifier(inner, cache, "m1").ClassifyIntent(ctx, withContext); calls != 1 {
		t.Errorf("context changed the key: %d calls", calls)
	}

	misses := map[string]struct {
		model string
		req   IntentRequest
	}{
		"another model":       {"m2", base},
		"another message":     {"m1", IntentRequest{Message: "what is a copay?", Intents: faqIntents}},
		"another intent":      {"m1", IntentRequest{Message: base.Message, Intents: faqIntents[:1]}},
		"another pattern":     {"m1", IntentRequest{Message: base.Message, Intents: []Intent{{Name: "faq", Description: "a question", Patterns: []string{"what's"}}, {Name: "booking"}}}},
		"another description": {"m1", IntentRequest{Message: base.Message, Intents: []Intent{{Name: "faq", Description: "any question", Patterns: []string{"what is"}}, {Name: "booking"}}}},
	}
	for name, m := range misses {
		before := calls
		_, _ = CachedClassifier(inner, cache, m.model).ClassifyIntent(ctx, m.req)
		if calls != before+1 {
			t.Errorf("%s: served from cache", name)
		}
	}
}

func TestCachedClassifierSkipsErrors(t *testing.T) {
	cache := NewIntentCache(16, time.Hour, nil)
	calls := 0
	c := CachedClassifier(countingClassifier(t, &calls, &Error{Class: Invalid, Err: errors.New("bad json")}), cache, "m")
	req := IntentRequest{Message: "hi", Intents: faqIntents}
	for range 2 {
		got, err := c.ClassifyIntent(context.Background(), req)
		if ClassOf(err) != Invalid || got.Intent != NoIntent {
			t.Errorf("ClassifyIntent = %+v, %v", got, err)
		}
	}
	if calls != 2 || cache.Len() != 0 {
		t.Errorf("%d calls, %d entries: errors must not be cached", calls, cache.Len())
	}
}

func TestIntentCacheSizeBound(t *testing.T) {
	cache := NewIntentCache(3, 0, nil)
	for i := range 3 {
		cache.Add(fmt.Sprint(i), IntentResponse{Intent: fmt.Sprint(i)})
	}
	cache.Get("0") // 0 is now the most recently used; 1 the least
	cache.Add("3", IntentResponse{Intent: "3"})
	if cache.Len() != 3 {
		t.Errorf("Len = %d, want 3", cache.Len())
	}
	if _, ok := cache.Get("1"); ok {
		t.Error("the least recently used entry survived")
	}
	for _, k := range []string{"0", "2", "3"} {
		if got, ok := cache.Get(k); !ok || got.Intent != k {
			t.Errorf("Get(%s) = %+v, %v", k, got, ok)
		}
	}
	for i := range 100 {
		cache.Add(fmt.Sprint("k", i), IntentResponse{})
	}
	if cache.Len() != 3 {
		t.Errorf("Len = %d after 100 adds, want 3", cache.Len())
	}
	if NewIntentCache(0, 0, nil).size != DefaultIntentCacheSize {
		t.Error("size 0 is not the default size")
	}
}

func TestIntentCacheConcurrent(t *testing.T) {
	cache := NewIntentCache(8, time.Minute, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := fmt.Sprint((g + i) % 20)
				if _, ok := cache.Get(k); !ok {
					cache.Add(k, IntentResponse{Intent: k})
				}
			}
		})
	}
	wg.Wait()
	if cache.Len() > 8 {
		t.Errorf("Len = %d, want <= 8", cache.Len())
	}
}

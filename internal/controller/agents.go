package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/agent"
	"github.com/journeyops/journey-operator/internal/agent/builtin"
	"github.com/journeyops/journey-operator/internal/agent/openai"
	"github.com/journeyops/journey-operator/internal/step"
)

// AgentFactory builds the agent that answers for an AgentSpec in a namespace: the
// step protocol's port.
type AgentFactory = step.AgentFactory

// AgentFactoryFunc adapts a function to AgentFactory.
type AgentFactoryFunc = step.AgentFactoryFunc

// intentCacheTTL is how long a classification is reused when the journey sets no
// intentDetection.cacheTTL (the engine passes it with each request). One cache serves the
// process; its key holds the model, the message and the whole intent set, so journeys
// never see each other's answers.
const intentCacheTTL = 5 * time.Minute

// DefaultAgents builds builtin agents, and openai agents with the API key read from the
// Secret at each call: never cached beyond the call, never logged or written to status.
// Intent classifications of openai agents go through a bounded, TTL cache.
func DefaultAgents(opts ...openai.Option) AgentFactory {
	cache := agent.NewIntentCache(agent.DefaultIntentCacheSize, intentCacheTTL, time.Now)
	return AgentFactoryFunc(func(ctx context.Context, secrets client.Reader, namespace string, spec flowv1.AgentSpec) (agent.Agent, error) {
		if spec.Provider != flowv1.ProviderOpenAI {
			return builtin.New(spec), nil
		}
		key, err := apiKey(ctx, secrets, namespace, spec)
		if err != nil {
			return nil, err
		}
		a, err := openai.New(spec, key, opts...)
		if err != nil {
			return nil, &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem, Agent: string(spec.Name), Err: err}
		}
		return agent.CachedClassifier(a, cache, spec.BaseURL+"|"+spec.Model), nil
	})
}

func apiKey(ctx context.Context, secrets client.Reader, namespace string, spec flowv1.AgentSpec) (string, error) {
	ref := spec.APIKeySecretRef
	if ref == nil {
		return "", nil
	}
	var secret corev1.Secret
	err := secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &secret)
	if apierrors.IsNotFound(err) {
		return "", &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem, Agent: string(spec.Name),
			Err: fmt.Errorf("API key Secret %q not found in namespace %q", ref.Name, namespace)}
	}
	if err != nil {
		return "", err // transient: the API server will answer again
	}
	key, ok := secret.Data[ref.Key]
	if !ok || len(key) == 0 {
		return "", &agent.Error{Class: agent.Terminal, Kind: flowv1.FailureValidation, Source: flowv1.FailureSystem, Agent: string(spec.Name),
			Err: errors.New("API key Secret " + ref.Name + " has no key " + ref.Key)}
	}
	return string(key), nil
}

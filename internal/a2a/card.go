package a2a

import (
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// ProtocolVersion is the A2A protocol version the gateway speaks (that of the A2A Go
// SDK it is built on).
const ProtocolVersion = "0.3.0"

// BearerScheme is the name of the agent card's security scheme: a Kubernetes bearer
// token, checked with a TokenReview.
const BearerScheme a2a.SecuritySchemeName = "kubernetes"

// Card is the agent card of journey j, served at url: its name and description, a
// skill per pathway (from the pathway's signature: instructions, intent, guidelines,
// and the intent patterns of the global transitions into it as examples), JSON-RPC
// with streaming, and the bearer token security scheme. pathways maps the journey's
// local pathway names to their specs; a pathway missing from it gets a skill with its
// name only.
func Card(j *flowv1.Journey, pathways map[string]*flowv1.PathwaySpec, url string) *a2a.AgentCard {
	desc := j.Spec.Description
	if desc == "" {
		desc = fmt.Sprintf("The journey %s/%s: it starts in pathway %s", j.Namespace, j.Name, j.Spec.EntryPathway)
	}
	version := j.Status.ReadyRevision
	if version == "" {
		version = fmt.Sprintf("generation-%d", j.Generation)
	}
	card := &a2a.AgentCard{
		Name:               j.Name,
		Description:        desc,
		URL:                url,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    ProtocolVersion,
		Version:            version,
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			BearerScheme: a2a.HTTPAuthSecurityScheme{
				Scheme: "Bearer",
				Description: "A Kubernetes bearer token (a service account token, or any token the cluster's " +
					"authenticators accept), checked with a TokenReview; the gateway acts as its user, " +
					"so the cluster's RBAC and admission decide what it may do",
			},
		},
		Security: []a2a.SecurityRequirements{{BearerScheme: a2a.SecuritySchemeScopes{}}},
	}
	for _, p := range j.Spec.Pathways {
		card.Skills = append(card.Skills, skill(j, string(p.Name), pathways[string(p.Name)]))
	}
	return card
}

func skill(j *flowv1.Journey, name string, p *flowv1.PathwaySpec) a2a.AgentSkill {
	s := a2a.AgentSkill{ID: name, Name: name, Tags: []string{"journey:" + j.Name, "pathway:" + name}}
	if name == string(j.Spec.EntryPathway) {
		s.Tags = append(s.Tags, "entry")
	}
	var desc []string
	if p != nil {
		sig := p.Signature
		if sig.Instructions != "" {
			desc = append(desc, sig.Instructions)
		}
		if sig.Intent != "" {
			desc = append(desc, "Intent: "+sig.Intent)
		}
		if len(sig.Guidelines) > 0 {
			desc = append(desc, "Guidelines: "+strings.Join(sig.Guidelines, "; "))
		}
	}
	if len(desc) == 0 {
		desc = append(desc, "Pathway "+name+" of the journey "+j.Name)
	}
	s.Description = strings.Join(desc, "\n")
	for _, t := range j.Spec.Transitions {
		if t.To == name && t.Trigger.Intent != nil {
			s.Examples = append(s.Examples, t.Trigger.Intent.Patterns...)
		}
	}
	return s
}

package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// resource is one resource the operator's CRDs serve, by group and plural.
type resource struct{ group, plural string }

// served are the resources of config/crd/bases: every kind the operator adds.
func served(t *testing.T) []resource {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var out []resource
	for _, p := range paths {
		rel, _ := filepath.Rel(testenv.RepoRoot(), p)
		for _, crd := range fromFile(t, rel).objs {
			out = append(out, resource{
				group:  fmt.Sprint(nested(t, crd, "spec", "group")),
				plural: fmt.Sprint(nested(t, crd, "spec", "names", "plural")),
			})
		}
	}
	return out
}

// grants reports whether a role's rules allow verb on group/resource (resource may
// name a subresource, "sessions/status"). No rule of these roles uses wildcards or
// resource names; a rule that did would not count.
func grants(t *testing.T, role *unstructured.Unstructured, verb, group, res string) bool {
	t.Helper()
	rules, _ := role.Object["rules"].([]any)
	for _, r := range rules {
		rule := r.(map[string]any)
		if _, named := rule["resourceNames"]; named {
			continue
		}
		if slices.Contains(strs(rule["apiGroups"]), group) && slices.Contains(strs(rule["resources"]), res) &&
			slices.Contains(strs(rule["verbs"]), verb) {
			return true
		}
	}
	return false
}

// TestUserRolesCoverEveryResource: in the chart and in config/default, journey-viewer
// reads every resource the operator serves (Journeys, Pathways, Sessions, Budgets, and
// any kind added later) and their status, and changes none; journey-editor also
// creates, changes and deletes each of them. journey-approver keeps to what
// `kubectl journey approve` needs: it patches Sessions, creates and deletes nothing.
func TestUserRolesCoverEveryResource(t *testing.T) {
	read := []string{"get", "list", "watch"}
	write := []string{"create", "update", "patch", "delete"}
	installs := map[string]struct {
		r      *rendered
		prefix string
	}{
		"chart":          {renderChart(t, clusterRelease, clusterNS, nil), "jo-journey-operator-"},
		"config/default": {renderKustomize(t, filepath.Join(testenv.RepoRoot(), "config", "default")), "journey-operator-"},
	}
	resources := served(t)
	for name, in := range installs {
		viewer := in.r.get(t, "ClusterRole", "", in.prefix+"journey-viewer")
		editor := in.r.get(t, "ClusterRole", "", in.prefix+"journey-editor")
		approver := in.r.get(t, "ClusterRole", "", in.prefix+"journey-approver")
		for _, res := range resources {
			for _, v := range read {
				if !grants(t, viewer, v, res.group, res.plural) {
					t.Errorf("%s: journey-viewer cannot %s %s.%s", name, v, res.plural, res.group)
				}
				if !grants(t, editor, v, res.group, res.plural) {
					t.Errorf("%s: journey-editor cannot %s %s.%s", name, v, res.plural, res.group)
				}
			}
			for _, role := range []*unstructured.Unstructured{viewer, editor} {
				if !grants(t, role, "get", res.group, res.plural+"/status") {
					t.Errorf("%s: %s cannot get %s/status", name, role.GetName(), res.plural)
				}
			}
			for _, v := range write {
				if !grants(t, editor, v, res.group, res.plural) {
					t.Errorf("%s: journey-editor cannot %s %s.%s", name, v, res.plural, res.group)
				}
				if grants(t, viewer, v, res.group, res.plural) {
					t.Errorf("%s: journey-viewer may %s %s.%s", name, v, res.plural, res.group)
				}
				if v != "update" && v != "patch" && grants(t, approver, v, res.group, res.plural) {
					t.Errorf("%s: journey-approver may %s %s.%s", name, v, res.plural, res.group)
				}
			}
			for _, role := range []*unstructured.Unstructured{viewer, editor, approver} {
				for _, v := range append(write, "deletecollection") {
					if grants(t, role, v, res.group, res.plural+"/status") {
						t.Errorf("%s: %s may %s %s/status, which only the manager writes", name, role.GetName(), v, res.plural)
					}
				}
			}
		}
		for _, v := range []string{"update", "patch"} {
			if !grants(t, approver, v, "flow.journey.dev", "sessions") {
				t.Errorf("%s: journey-approver cannot %s sessions", name, v)
			}
			if grants(t, approver, v, "flow.journey.dev", "budgets") {
				t.Errorf("%s: journey-approver may %s budgets", name, v)
			}
		}
	}
}

package reliability

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/controller"
	"github.com/journeyops/journey-operator/internal/testenv"
)

const shardLabel = "journey.dev/shard"

// entryJourney is a Journey of three pathways that run on entry, so a Session
// completes with no message.
func entryJourney(ns, name string) []client.Object {
	p := func(pname, next string) *flowv1.Pathway {
		return &flowv1.Pathway{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + pname},
			Spec:       flowv1.PathwaySpec{RunOn: flowv1.RunOnEntry, Next: flowv1.Name(next), Builtin: &flowv1.BuiltinPathway{Reply: "done with " + pname}},
		}
	}
	j := &flowv1.Journey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	j.Spec.EntryPathway = "first"
	objs := []client.Object{p("first", "second"), p("second", "third"), p("third", "")}
	for _, local := range []string{"first", "second", "third"} {
		j.Spec.Pathways = append(j.Spec.Pathways, flowv1.PathwayEntry{Name: flowv1.Name(local), PathwayRef: name + "-" + local})
	}
	return append(objs, j)
}

// startShardManager runs a manager the way cmd/manager --shard-selector does, with its
// own user agent so its writes can be told apart in managedFields.
func startShardManager(t *testing.T, ns, userAgent string, shard labels.Selector) *testenv.Manager {
	t.Helper()
	return env.StartManager(t, testenv.ManagerOptions{
		Namespaces: []string{ns},
		Cache:      controller.CacheOptions(shard),
		UserAgent:  userAgent,
		Setup:      func(mgr ctrl.Manager) error { return controller.Setup(mgr, controller.Options{ShardSelector: shard}) },
	})
}

// statusWriters lists the field managers that wrote the Session's status.
func statusWriters(s *flowv1.Session) []string {
	var out []string
	for _, mf := range s.ManagedFields {
		if mf.Subresource == "status" {
			out = append(out, mf.Manager)
		}
	}
	sort.Strings(out)
	return out
}

func TestShardedManagersRunOnlyTheirSessions(t *testing.T) {
	ns := newNamespace(t)
	create(t, entryJourney(ns, "steps")...)
	const perShard = 5
	rvs := map[string]string{}
	for _, shard := range []string{"a", "b", ""} {
		for i := range perShard {
			name := fmt.Sprintf("s-%s-%d", shard, i)
			if shard == "" {
				name = fmt.Sprintf("s-none-%d", i)
			}
			s := &flowv1.Session{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       flowv1.SessionSpec{JourneyRef: flowv1.JourneyReference{Name: "steps"}},
			}
			if shard != "" {
				s.Labels = map[string]string{shardLabel: shard}
			}
			create(t, s)
			rvs[name] = s.ResourceVersion
		}
	}
	shardA := labels.SelectorFromSet(labels.Set{shardLabel: "a"})
	shardB := labels.SelectorFromSet(labels.Set{shardLabel: "b"})
	if a, b := controller.LeaderElectionID(shardA), controller.LeaderElectionID(shardB); a == b || a == controller.DefaultLeaderElectionID {
		t.Errorf("shards a and b share a leader election lease: %q, %q", a, b)
	}

	sessions := func() map[string]*flowv1.Session {
		out := map[string]*flowv1.Session{}
		for _, s := range listSessions(t, ns) {
			out[s.Name] = s.DeepCopy()
		}
		return out
	}
	completed := func(prefix string) error {
		for name, s := range sessions() {
			if strings.HasPrefix(name, prefix) && s.Status.Phase != flowv1.PhaseCompleted {
				return fmt.Errorf("%s is %q (conditions %+v, writers %v)", name, s.Status.Phase, s.Status.Conditions, statusWriters(s))
			}
		}
		return nil
	}
	untouched := func(prefixes ...string) {
		t.Helper()
		for name, s := range sessions() {
			for _, p := range prefixes {
				if strings.HasPrefix(name, p) && (s.ResourceVersion != rvs[name] || s.Status.Phase != "") {
					t.Errorf("%s was written (phase %q, writers %v) by a manager of another shard", name, s.Status.Phase, statusWriters(s))
				}
			}
		}
	}

	// Only shard a runs: its Sessions complete, the others stay as created.
	mgrA := startShardManager(t, ns, "manager-a", shardA)
	eventually(t, 60*time.Second, func() error { return completed("s-a-") })
	// The other Sessions are not even in shard a's cache.
	var cached flowv1.SessionList
	if err := mgrA.GetCache().List(context.Background(), &cached, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range cached.Items {
		if s.Labels[shardLabel] != "a" {
			t.Errorf("shard a caches Session %s of shard %q", s.Name, s.Labels[shardLabel])
		}
	}
	if len(cached.Items) != perShard {
		t.Errorf("shard a caches %d Sessions, want %d", len(cached.Items), perShard)
	}
	time.Sleep(500 * time.Millisecond) // give a stray reconcile time to show up
	untouched("s-b-", "s-none-")

	// Shard b starts beside it and runs its own.
	startShardManager(t, ns, "manager-b", shardB)
	eventually(t, 60*time.Second, func() error { return completed("s-b-") })
	time.Sleep(500 * time.Millisecond)
	untouched("s-none-")

	for name, s := range sessions() {
		var want string
		switch {
		case strings.HasPrefix(name, "s-a-"):
			want = "[manager-a]"
		case strings.HasPrefix(name, "s-b-"):
			want = "[manager-b]"
		default:
			continue
		}
		if got := fmt.Sprint(statusWriters(s)); got != want {
			t.Errorf("%s status written by %s, want %s", name, got, want)
		}
		if s.Status.Step < 3 {
			t.Errorf("%s took %d steps, want at least 3", name, s.Status.Step)
		}
	}
}

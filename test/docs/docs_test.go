package docs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
	"github.com/journeyops/journey-operator/internal/journeytest"
	"github.com/journeyops/journey-operator/internal/localcluster"
	"github.com/journeyops/journey-operator/internal/testenv"
	"github.com/journeyops/journey-operator/internal/tools/clinic"
)

// cluster is the control plane with the manager (builtin agent, admission webhooks)
// and the plugin built from this repository, shared by every document.
var cluster *localcluster.Cluster

// clinicURL is the clinic MCP server the documents' tool servers reach: the test
// serves one on a free port and gives its URL wherever a block names clinic.Address's
// (docs/tools.md), so that runs of the test side by side do not share a port.
var clinicURL string

func TestMain(m *testing.M) {
	localcluster.Main(m, "journey-docs-", func(c *localcluster.Cluster) {
		cluster = c
		cl, err := clinic.Listen("127.0.0.1:0", false)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		clinicURL = cl.URL
		gw, err := c.ServeA2A("127.0.0.1:0", false)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		gatewayURL = gw.URL
	})
}

// gatewayURL is the A2A gateway the documents reach (docs/a2a.md): served on a free
// port, given wherever a block names localcluster.GatewayAddress.
var gatewayURL string

// documentedGatewayURL is the URL of the A2A gateway that the documents name.
const documentedGatewayURL = "http://" + localcluster.GatewayAddress

// documentedClinicURL is the URL of the clinic MCP server that the documents name.
const documentedClinicURL = "http://" + clinic.Address + "/mcp"

// blockTimeout bounds one block (kubectl journey say --wait waits up to 60s).
const blockTimeout = 90 * time.Second

// TestDocsRun runs README.md and docs/*.md: each document in a namespace of its own,
// its blocks in order. A block fails the test with the document and line.
//
//   - sh, bash, shell: run by bash (set -eo pipefail) from a working directory that
//     holds a copy of config/ (so `kubectl apply -k config/samples` works and files the
//     commands write stay out of the repository), with KUBECONFIG set to a kubeconfig
//     whose context's namespace is the document's, HOME in the working directory and
//     the plugin first on PATH. `make install-plugin` is the one make target that runs:
//     the harness already built the plugin from this repository and put it on PATH,
//     so the line checks that kubectl finds it. Every other make, helm, docker, go or
//     crane command is refused: such a block must be marked illustrative. An `npm
//     install PKG@VERSION` line must name the versions hack/npm pins; it links the
//     packages hack/setup-npm.sh installed instead of downloading them again.
//   - console: each "$ " command runs the same way. When the block shows "error: ..."
//     after a command, the command must fail; otherwise it must succeed. The output
//     is not compared: it shows names, times and ids that differ from run to run.
//   - yaml: a block of Kubernetes objects (each with apiVersion and kind) is applied
//     with `kubectl apply -f -` in the document's namespace (really applied, not a dry
//     run); a journey test (name, manifests and steps) is written under
//     config/samples/tests of the working directory and run with
//     `kubectl journey test`. Any other YAML (a fragment of a spec) must be marked.
//
// A block that names the clinic MCP server at its documented address
// (http://127.0.0.1:8766/mcp, where `go run ./hack/clinic` and `DEMO_KEEP=1 make demo`
// serve it) gets the URL of the clinic this test serves instead.
func TestDocsRun(t *testing.T) {
	t.Parallel()
	root := testenv.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	// The documents run in parallel, each in its own namespace and directory; the
	// count is checked once all of them have run.
	var ran atomic.Int64
	t.Cleanup(func() {
		if ran.Load() == 0 {
			t.Error("no block ran")
		}
	})
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			md, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			n, errs := newRunner(t).run(rel, string(md))
			ran.Add(int64(n))
			for _, err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestBrokenDocFails shows that the runner fails: a broken command, an expected error
// that does not happen, an unmarked fragment, an unmarked make target, and an invalid
// manifest each fail with their line, and the blocks around them run.
func TestBrokenDocFails(t *testing.T) {
	t.Parallel()
	md := strings.Join([]string{
		"# Broken", //                                  1
		"```sh",    //                                  2
		"kubectl get journeys",
		"kubectl journey no-such-command", //           4
		"```",
		"```console", //                                6
		"$ kubectl get namespaces",
		"error: this was expected to fail",
		"```",
		"```yaml", //                                  10
		"spec: {entryPathway: a}",
		"```",
		"```sh", //                                    13
		"make deploy IMG=example.com/x:v1",
		"```",
		"```yaml", //                                  16
		"apiVersion: flow.journey.dev/v1alpha1",
		"kind: Pathway",
		"metadata: {name: p}",
		"spec: {executor: Nonsense}",
		"```",
		"*(illustrative)*",
		"```sh",
		"make deploy",
		"```",
		"```sh", //                                    26
		"kubectl create configmap ran",
		"```",
	}, "\n")
	r := newRunner(t)
	ran, errs := r.run("broken.md", md)
	want := []string{
		`broken.md:4: .*no-such-command`,
		`broken.md:7: .*shows an error.*succeeded`,
		`broken.md:10: .*not Kubernetes objects.*illustrative`,
		`broken.md:14: .*make deploy.*illustrative`,
		`broken.md:16: .*Nonsense`,
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !regexp.MustCompile(`(?s)` + w).MatchString(errs[i].Error()) {
			t.Errorf("error %d = %v, want it to match %q", i, errs[i], w)
		}
	}
	if ran != 6 {
		t.Errorf("%d blocks ran, want 6 (the illustrative one does not)", ran)
	}
	var cm corev1.ConfigMap
	if err := cluster.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.namespace, Name: "ran"}, &cm); err != nil {
		t.Errorf("the block after the failures did not run: %v", err)
	}
}

// runner runs the blocks of one document.
type runner struct {
	t         *testing.T
	namespace string
	dir       string
	env       []string
}

// newRunner creates the document's namespace, working directory and kubeconfig.
func newRunner(t *testing.T) *runner {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "docs-"}}
	if err := cluster.Env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "config"), os.DirFS(filepath.Join(testenv.RepoRoot(), "config"))); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = ns.Name
	kubeconfig := filepath.Join(dir, ".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		"HOME="+dir,
		"PATH="+filepath.Join(cluster.Dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	return &runner{t: t, namespace: ns.Name, dir: dir, env: env}
}

// run runs the checked blocks of a document in order and returns how many ran and
// the errors, each naming file:line.
func (r *runner) run(file, md string) (ran int, errs []error) {
	for _, b := range Extract(file, md) {
		if !b.Checked() || b.Illustrative {
			continue
		}
		ran++
		b.Text = strings.ReplaceAll(b.Text, documentedClinicURL, clinicURL)
		b.Text = strings.ReplaceAll(b.Text, documentedGatewayURL, gatewayURL)
		var err error
		switch b.Lang {
		case "console":
			err = r.console(b)
		case "yaml":
			err = r.yaml(b)
		default:
			err = r.shell(b.File, b.Line+1, b.Text, false)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return ran, errs
}

// npmInstall is a line that installs npm packages: the docs test does not download
// them again but links the node_modules hack/setup-npm.sh installed, once it checked
// that the line names the versions hack/npm pins.
var npmInstall = regexp.MustCompile(`^\s*npm install\s`)

// npmPackagesLink is the command that stands for an `npm install PKG@VERSION...` line:
// a node_modules link to the packages hack/setup-npm.sh installed, when each package
// the line names is pinned at that version in hack/npm/package.json.
func npmPackagesLink(line string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "hack", "npm", "package.json"))
	if err != nil {
		return "", err
	}
	var pinned struct{ Dependencies map[string]string }
	if err := json.Unmarshal(raw, &pinned); err != nil {
		return "", err
	}
	for _, arg := range strings.Fields(line)[2:] {
		if strings.HasPrefix(arg, "-") {
			continue
		}
		at := strings.LastIndex(arg, "@")
		if at <= 0 || pinned.Dependencies[arg[:at]] != arg[at+1:] {
			return "", fmt.Errorf("%q: the docs install %s, but hack/npm/package.json pins %s at %q: name the pinned version",
				strings.TrimSpace(line), arg, arg[:max(at, 0)], pinned.Dependencies[arg[:max(at, 0)]])
		}
	}
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "setup-npm.sh"))
	cmd.Stderr = os.Stderr
	dir, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bash hack/setup-npm.sh: %w", err)
	}
	return "ln -sfn " + strconv.Quote(filepath.Join(strings.TrimSpace(string(dir)), "node_modules")) + " node_modules", nil
}

// refused are the commands a block cannot run here: it must be marked illustrative.
var refused = regexp.MustCompile(`^\s*(make|helm|docker|podman|go|crane|ko|kind|minikube)\s`)

// shell runs script, whose first line is line of file, with bash; when wantErr, it
// must fail.
func (r *runner) shell(file string, line int, script string, wantErr bool) error {
	lines := strings.Split(script, "\n")
	for i, l := range lines {
		switch {
		case regexp.MustCompile(`^\s*make install-plugin\b`).MatchString(l):
			lines[i] = `kubectl journey --help >/dev/null`
		case npmInstall.MatchString(l):
			link, err := npmPackagesLink(l)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", file, line+i, err)
			}
			lines[i] = link
		case refused.MatchString(l):
			return fmt.Errorf("%s:%d: %q needs what the docs test does not have (a cluster of your own, a registry, the toolchain's network): mark the block %s",
				file, line+i, strings.TrimSpace(l), IllustrativeMark)
		}
	}
	lineFile := filepath.Join(r.dir, ".failed-line")
	_ = os.Remove(lineFile)
	const header = 2
	full := "set -eo pipefail\ntrap 'echo $LINENO > " + strconv.Quote(lineFile) + "' ERR\n" + strings.Join(lines, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", full)
	cmd.Dir, cmd.Env = r.dir, r.env
	// On timeout, kill the whole process group: a command still running (a watch, a
	// server) would otherwise hold the output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if wantErr {
		if err == nil {
			return fmt.Errorf("%s:%d: the document shows an error, but the command succeeded:\n%s", file, line, out)
		}
		return nil
	}
	if err == nil {
		return nil
	}
	at := line
	if raw, rerr := os.ReadFile(lineFile); rerr == nil {
		if n, aerr := strconv.Atoi(strings.TrimSpace(string(raw))); aerr == nil && n > header {
			at = line + n - header - 1
		}
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s", blockTimeout)
	}
	return fmt.Errorf("%s:%d: %w (namespace %s):\n%s", file, at, err, r.namespace, out)
}

func (r *runner) console(b Block) error {
	for _, c := range b.Commands() {
		if err := r.shell(b.File, c.Line, c.Text, c.ExpectsError()); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) yaml(b Block) error {
	objs, err := testenv.DecodeManifests([]byte(b.Text))
	if err != nil {
		return fmt.Errorf("%s: %w", b.Where(), err)
	}
	var top map[string]any
	_ = yaml.Unmarshal([]byte(b.Text), &top)
	if top["name"] != nil && top["steps"] != nil && top["manifests"] != nil {
		name := fmt.Sprintf("%s-%d.yaml", strings.NewReplacer("/", "-", ".md", "").Replace(b.File), b.Line)
		path := filepath.Join(r.dir, "config", "samples", "tests", name)
		if err := os.WriteFile(path, []byte(b.Text), 0o644); err != nil {
			return err
		}
		return r.shell(b.File, b.Line, "kubectl journey test "+strconv.Quote(path), false)
	}
	for _, o := range objs {
		if o.GetAPIVersion() == "" || o.GetKind() == "" {
			return fmt.Errorf("%s: the block is YAML but not Kubernetes objects (each with apiVersion and kind) nor a journey test: make it one, or mark it %s",
				b.Where(), IllustrativeMark)
		}
	}
	path := filepath.Join(r.dir, ".block.yaml")
	if err := os.WriteFile(path, []byte(b.Text), 0o644); err != nil {
		return err
	}
	return r.shell(b.File, b.Line, "kubectl apply -f - < "+strconv.Quote(path), false)
}

// TestSamplesRevisionsThroughKustomize follows a new user: the samples applied with
// kubectl apply -k (kustomize reads their folded CEL expressions with other line
// breaks than kubectl apply -f) get from the Journey controller the revision names
// that kubectl journey test gives the same files, so a recorded test can point at
// the source files.
func TestSamplesRevisionsThroughKustomize(t *testing.T) {
	t.Parallel()
	r := newRunner(t)
	if err := r.shell("samples", 1, "kubectl apply -k config/samples >/dev/null", false); err != nil {
		t.Fatal(err)
	}
	for _, sample := range []string{"healthcare-referral", "review-loop", "planning", "delivery-pipeline"} {
		c, err := journeytest.Load(filepath.Join(testenv.RepoRoot(), "config", "samples", "tests", sample+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Resolve(); err != nil {
			t.Fatal(err)
		}
		_, offline, err := journeytest.Compile(c.Journey, c.Data)
		if err != nil {
			t.Fatal(err)
		}
		var j flowv1.Journey
		testenv.Eventually(t, 30*time.Second, func() error {
			if err := cluster.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.namespace, Name: sample}, &j); err != nil {
				return err
			}
			if j.Status.ReadyRevision == "" {
				return fmt.Errorf("journey %s has no revision yet", sample)
			}
			return nil
		})
		if j.Status.ReadyRevision != offline {
			t.Errorf("journey %s: revision %s in the cluster (kubectl apply -k), %s from kubectl journey test", sample, j.Status.ReadyRevision, offline)
		}
	}
}

// TestReadmeListsEveryPackage: the Layout table of README.md names, in backquotes,
// every directory of the repository that holds a Go package (a .go file git tracks, or
// any .go file outside a git checkout), so a new package cannot go unmentioned.
func TestReadmeListsEveryPackage(t *testing.T) {
	root := testenv.RepoRoot()
	files, err := goFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, _, _ := strings.Cut(string(readme), "\n## Documentation")
	if _, after, ok := strings.Cut(table, "\n## Layout"); ok {
		table = after
	}
	seen := map[string]bool{}
	for _, f := range files {
		dir := filepath.Dir(f)
		if seen[dir] || strings.Contains(dir, "testdata") {
			continue
		}
		seen[dir] = true
		if !strings.Contains(table, "`"+dir+"`") {
			t.Errorf("README.md's Layout table does not name the package `%s`", dir)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found %d package directories; want the repository's", len(seen))
	}
}

// goFiles lists the .go files of the repository at root, relative to it: those git
// tracks, or, outside a git checkout, every one but under bin/ and hidden directories.
func goFiles(root string) ([]string, error) {
	if out, err := exec.Command("git", "-C", root, "ls-files", "*.go").Output(); err == nil {
		return strings.Fields(string(out)), nil
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

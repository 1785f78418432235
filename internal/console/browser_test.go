package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

var (
	setupOnce sync.Once
	setupErr  error
	shared    *cluster
	stopAll   func()
	chromeBin string
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopChromium()
	if stopAll != nil {
		stopAll()
	}
	os.Exit(code)
}

func logDiscard() logr.Logger { return logr.Discard() }

func jsonOf(t *testing.T, v any) *apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// setup installs Chromium when it is missing (failing when it cannot), then starts the
// control plane, the manager and the console once for all tests.
func setup(t *testing.T) *cluster {
	t.Helper()
	setupOnce.Do(func() {
		if chromeBin, setupErr = chromium(); setupErr != nil {
			return
		}
		shared, stopAll, setupErr = startCluster(context.Background())
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return shared
}

// The package's headless Chromium, started by the first test that needs a browser and
// stopped by TestMain: starting Chromium takes more CPU than most tests' pages.
var (
	chromiumOnce sync.Once
	chromiumCtx  context.Context // its first tab, which the test tabs are opened from
	chromiumErr  error
	stopChromium = func() {}
)

// browser opens a tab for the test in the package's Chromium (setup installs it), in a
// browser context of its own: no cookies, storage or cache from another test. The tab
// closes when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	chromiumOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromeBin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		stopChromium = func() { cancel(); cancelAlloc() }
		if chromiumErr = chromedp.Do(ctx); chromiumErr == nil {
			chromiumCtx = ctx
		}
	})
	if chromiumErr != nil {
		t.Fatalf("starting Chromium (%s): %v", chromeBin, chromiumErr)
	}
	ctx, cancel := chromedp.NewContext(chromiumCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("opening a tab in Chromium (%s): %v", chromeBin, err)
	}
	return ctx
}

// screenshotDir is $CONSOLE_SCREENSHOTS, else a temporary directory that is kept.
var screenshotDir = sync.OnceValue(func() string {
	if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		return dir
	}
	dir, _ := os.MkdirTemp("", "console-screenshots-")
	return dir
})

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(screenshotDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func visit(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is true.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		// A form submission navigates; poll again in the new page.
		if navigating(err) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		body := eval[string](t, ctx, "document.body ? document.body.innerText : ''")
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
}

// navigating tells whether err comes from a page that navigated while the browser ran
// JavaScript in it: the old page's execution context is gone, and Chromium reports that
// in several words depending on when the navigation came.
func navigating(err error) bool {
	for _, s := range []string{"navigated or closed", "Cannot find context with specified id", "Execution context was destroyed"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

func awaiting(s *flowv1.Session) bool {
	return s.Status.Phase == flowv1.PhaseAwaitingApproval && s.Status.LastDecision != nil
}

func TestConsoleInBrowser(t *testing.T) {
	c := setup(t)
	ctx := browser(t)
	// A Session of team-b, where ann has no RBAC: she must never see it.
	c.newSession(t, "team-b", "pl-hidden")
	hidden := c.waitSession(t, "team-b", "pl-hidden", "waiting for approval", awaiting)

	t.Run("sessions table shows a new Session without a reload", func(t *testing.T) {
		visit(t, ctx, c.url+"sessions")
		waitFor(t, ctx, "live updates connect", `document.getElementById("live-status").textContent.startsWith("Live")`)
		eval[bool](t, ctx, `window.notReloaded = true`)
		c.newSession(t, "team-a", "pl-live")
		waitFor(t, ctx, "the new Session's row appears",
			`!!document.getElementById("session-team-a/pl-live") && window.notReloaded === true`)
		// It moves on by itself; the row follows it.
		c.waitSession(t, "team-a", "pl-live", "waiting for approval", awaiting)
		waitFor(t, ctx, "the row shows the new phase",
			`document.getElementById("session-team-a/pl-live").dataset.phase === "AwaitingApproval" && window.notReloaded === true`)
		if text := eval[string](t, ctx, `document.body.innerText`); strings.Contains(text, "pl-hidden") || strings.Contains(text, "team-b") {
			t.Errorf("ann sees team-b:\n%s", text)
		}
		screenshot(t, ctx, "sessions")
	})

	t.Run("session page shows its path and last reply", func(t *testing.T) {
		s := c.waitSession(t, "team-a", "pl-live", "waiting for approval", awaiting)
		visit(t, ctx, c.url+"sessions/team-a/pl-live")
		path := eval[string](t, ctx, `document.getElementById("path").textContent`)
		// validate-outline retries once (the sample's repairable outline).
		want := []string{"collect-context", "draft-outline", "validate-outline", "validate-outline", "draft-roadmap", "validate-roadmap",
			"draft-schedule", "validate-schedule", "seek-approval"}
		if steps := strings.Split(path, " → "); len(steps) != len(want) {
			t.Fatalf("path %q; want the pathways %v in order", path, want)
		}
		for i, step := range strings.Split(path, " → ") {
			if step != want[i] {
				t.Fatalf("path %q; want the pathways %v in order", path, want)
			}
		}
		if got, want := eval[string](t, ctx, `document.getElementById("last-reply").textContent`), s.Status.LastTurn.AssistantText; got != want || want == "" {
			t.Errorf("last reply %q; want %q", got, want)
		}
		if cls := eval[string](t, ctx, `document.getElementById("pw-seek-approval").getAttribute("class")`); !strings.Contains(cls, "current") {
			t.Errorf("seek-approval is drawn with classes %q; want current", cls)
		}
		if cls := eval[string](t, ctx, `document.getElementById("pw-draft-outline").getAttribute("class")`); !strings.Contains(cls, "visited") {
			t.Errorf("draft-outline is drawn with classes %q; want visited", cls)
		}
		if cls := eval[string](t, ctx, `String(document.getElementById("pw-publish-plan").getAttribute("class"))`); strings.Contains(cls, "visited") {
			t.Errorf("publish-plan, not reached yet, is drawn with classes %q", cls)
		}
		waitFor(t, ctx, "the timeline lists the transitions", `document.querySelectorAll(".timeline .item-transition").length >= 8`)
		screenshot(t, ctx, "session")
	})

	t.Run("journeys pages draw the graph with live counts", func(t *testing.T) {
		visit(t, ctx, c.url+"journeys")
		waitFor(t, ctx, "the planning journey is drawn ready",
			`!!document.querySelector(".card svg.graph") && document.querySelector(".card .state").textContent.includes("Ready")`)
		screenshot(t, ctx, "journeys")
		visit(t, ctx, c.url+"journeys/team-a/planning")
		waitFor(t, ctx, "one Session counted in seek-approval",
			`document.getElementById("pw-seek-approval").textContent.includes("1 session")`)
		screenshot(t, ctx, "journey")
	})

	t.Run("approve from the Approvals page as the user", func(t *testing.T) {
		visit(t, ctx, c.url+"approvals")
		waitFor(t, ctx, "the pending decision is listed", `!!document.getElementById("approval-team-a-pl-live")`)
		if text := eval[string](t, ctx, `document.body.innerText`); strings.Contains(text, "pl-hidden") {
			t.Errorf("ann sees the team-b decision:\n%s", text)
		}
		screenshot(t, ctx, "approvals")

		// ann cannot approve in team-b, even with a request the console accepts.
		refused := eval[string](t, ctx, fmt.Sprintf(`(async () => {
			const body = new URLSearchParams({csrf: document.querySelector("input[name=csrf]").value, decision: %q, action: "approve"});
			const r = await fetch("/approvals/team-b/pl-hidden", {method: "POST", body});
			return r.status + " " + (await r.text());
		})()`, hidden.Status.LastDecision.ID))
		if !strings.HasPrefix(refused, "403 ") || !strings.Contains(refused, "forbidden") {
			t.Errorf("approving in team-b as ann: %.300s", refused)
		}
		if s := c.waitSession(t, "team-b", "pl-hidden", "read", func(*flowv1.Session) bool { return true }); len(s.Spec.Approvals) != 0 {
			t.Errorf("team-b session got approvals %+v", s.Spec.Approvals)
		}

		if err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(`#approval-team-a-pl-live textarea[name=reason]`), "plan looks right"),
			chromedp.Click(chromedp.CSS(`#approval-team-a-pl-live button[value=approve]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the approval is confirmed", `!!document.querySelector(".flash") && document.querySelector(".flash").textContent.includes("approved")`)
		s := c.waitSession(t, "team-a", "pl-live", "completed after the approval", func(s *flowv1.Session) bool {
			return s.Status.Phase == flowv1.PhaseCompleted
		})
		if len(s.Spec.Approvals) != 1 {
			t.Fatalf("approvals %+v; want one", s.Spec.Approvals)
		}
		a := s.Spec.Approvals[0]
		if a.By != "ann" || !a.Approves() || a.Reason != "plan looks right" || a.At == nil || !a.At.Time.Equal(webhookNow) {
			t.Errorf("approval %+v; want approved by ann, stamped by the webhook at %s", a, webhookNow)
		}
		if s.Status.CurrentPathway != "publish-plan" {
			t.Errorf("the Session is in %q; want publish-plan", s.Status.CurrentPathway)
		}
	})

	t.Run("namespaces without RBAC are not shown", func(t *testing.T) {
		visit(t, ctx, c.url+"sessions/team-b/pl-hidden")
		text := eval[string](t, ctx, `document.body.innerText`)
		if !strings.Contains(text, "namespace team-b is not shown") || strings.Contains(text, hidden.Status.LastDecision.ID) {
			t.Errorf("the team-b Session page shows:\n%s", text)
		}
	})

	t.Run("narrow window", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 800)); err != nil {
			t.Fatal(err)
		}
		for _, page := range []string{"sessions", "sessions/team-a/pl-live", "approvals", "journeys"} {
			visit(t, ctx, c.url+page)
			if !eval[bool](t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
				t.Errorf("%s scrolls sideways at 390 px: %v px wide", page, eval[float64](t, ctx, `document.documentElement.scrollWidth`))
			}
		}
		screenshot(t, ctx, "session-narrow")
	})
}

// Changes need the console's token and its origin; requests to another Host are refused.
func TestConsoleRefusesForeignRequests(t *testing.T) {
	c := setup(t)
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	post := func(header http.Header, cookie string, form url.Values) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, c.url+"approvals/team-a/pl-any", strings.NewReader(form.Encode()))
		req.Header = header
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "journey_console_csrf", Value: cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, readAll(resp))
		return resp.StatusCode, b.String()
	}
	// The token, as a page hands it out.
	resp, err := http.Get(c.url + "approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	token := ""
	for _, ck := range resp.Cookies() {
		if ck.Name == "journey_console_csrf" {
			token = ck.Value
		}
	}
	if token == "" || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /approvals: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	form := url.Values{"csrf": {token}, "decision": {"d-1"}, "action": {"approve"}}
	wrong := "x" + token[1:]
	if wrong == token { // one token in 64 starts with x
		wrong = "y" + token[1:]
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		cookie string
		form   url.Values
		want   string
	}{
		{"no cookie", http.Header{}, "", form, "missing or stale console cookie"},
		{"no form token", http.Header{}, token, url.Values{"decision": {"d-1"}}, "missing or wrong form token"},
		{"wrong form token", http.Header{}, token, url.Values{"csrf": {wrong}}, "missing or wrong form token"},
		{"other origin", http.Header{"Origin": {"http://evil.example"}}, token, form, "request from another origin"},
		{"cross-site fetch", http.Header{"Sec-Fetch-Site": {"cross-site"}}, token, form, "cross-site request"},
	} {
		if code, body := post(tc.header, tc.cookie, tc.form); code != http.StatusForbidden || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q; want 403 %q", tc.name, code, body, tc.want)
		}
	}
	// With everything right, the request reaches the cluster, which has no such Session.
	if code, body := post(http.Header{"Origin": {"http://" + u.Host}}, token, form); code != http.StatusNotFound || !strings.Contains(body, "not found") {
		t.Errorf("a correct request: %d %.200q; want the API server's 404", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, c.url+"sessions", nil)
	req.Host = "rebound.example:" + u.Port()
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another Host: %d; want 421", resp.StatusCode)
	}
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

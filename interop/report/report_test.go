package report

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/internal/testutil"
)

const (
	chromium = "/usr/bin/chromium"
	// screenshotsEnv names the directory the test saves its screenshots to.
	screenshotsEnv = "LISTWATCH_REPORT_SCREENSHOTS"
	// browserTimeout bounds the whole browser session: generous, as the machine may be loaded.
	browserTimeout = 3 * time.Minute
)

// failingReport checks the history recorded against etcd 3.4.23 and writes its report, with the
// run's scenario results, to a file; it returns the file and the result.
func failingReport(t *testing.T) (string, *etcd.Result) {
	t.Helper()
	f, err := os.Open("testdata/etcd-3.4.23-seed5.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := etcd.ReadJSON(zr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := etcd.Check(h, etcd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) == 0 || h.Run == nil || h.Run.Version != "3.4.23" {
		t.Fatalf("the recorded history: %d violations, run %+v; want a failing run of etcd 3.4.23", len(res.Violations), h.Run)
	}
	var scenarios []check.ReportScenario
	b, err := os.ReadFile("testdata/etcd-3.4.23-seed5-scenarios.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &scenarios); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := etcd.WriteReport(out, h, res, &etcd.ReportInput{Scenarios: scenarios}); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path, res
}

// browser starts chromium headless on a fresh profile, with everything that would reach the
// network off, and collects the page's JavaScript errors.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000)}
	var mu sync.Mutex
	var jsErrors []string
	collect := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			jsErrors = append(jsErrors, fmt.Sprintf("%s (line %d)", msg, d.LineNumber))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				jsErrors = append(jsErrors, fmt.Sprintf("console.error %v", e.Args))
			}
		}
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), browserTimeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithListener(collect))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	return bctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), jsErrors...)
	}
}

// screenshot saves a screenshot of the viewport (or the whole page) as name, when screenshotsEnv
// names a directory.
func screenshot(t *testing.T, ctx context.Context, name string, whole bool) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	action := chromedp.CaptureScreenshot()
	if whole {
		action = chromedp.FullScreenshot(100)
	}
	buf, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// box is where an element is, what covers its centre, and what the page shows of it.
type box struct {
	Found, Highlighted, OnTop bool
	Top, Bottom, Left, Right  float64
	ViewHeight, ViewWidth     float64
	Text                      string
}

func (b box) inView() bool {
	return b.Found && b.Top >= 0 && b.Left >= 0 && b.Bottom <= b.ViewHeight && b.Right <= b.ViewWidth && b.OnTop
}

// locate reads where the element with id is.
func locate(ctx context.Context, id string) (box, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[box](fmt.Sprintf(`(() => {
		const el = document.getElementById(%q);
		if (!el) return {Found: false};
		const r = el.getBoundingClientRect();
		const top = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
		return {Found: true, Highlighted: el.classList.contains("hl"), OnTop: top !== null && (top === el || el.contains(top)),
			Top: r.top, Bottom: r.bottom, Left: r.left, Right: r.right, ViewHeight: innerHeight, ViewWidth: innerWidth,
			Text: el.textContent};
	})()`, id)))
}

// timelineState is what the timeline draws: its rows, whether every item drawn names key, and its
// status line.
type timelineState struct {
	Rows, Items int
	AllMatch    bool
	Status      string
}

func timeline(ctx context.Context, key string) (timelineState, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[timelineState](fmt.Sprintf(`(() => {
		const data = JSON.parse(document.getElementById("report-data").textContent);
		const byId = {};
		data.items.forEach(it => { byId[it.id] = it; });
		const drawn = Array.from(document.querySelectorAll("#timeline .it"));
		const key = %q;
		return {Rows: document.querySelectorAll("#timeline .row").length, Items: drawn.length,
			AllMatch: drawn.every(el => (byId[el.dataset.id].k || []).some(k => k.includes(key))),
			Status: document.getElementById("tl-status").textContent};
	})()`, key)))
}

// text is the text of the element sel selects.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// TestReportInBrowser: the report of a failing run against etcd 3.4.23 loads in chromium without a
// JavaScript error; the verdict and the first violation are visible on load; the violation's first
// link scrolls the timeline to its watch response, highlighted and in view, with its full text in
// the detail panel; "show on the timeline" highlights every item it links to; the key filter leaves only rows with items naming the key; zooming narrows the
// window. A JavaScript error thrown into the page is caught, as one in the report would be.
func TestReportInBrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no browser to test the report in: %s is missing (apt-get install chromium)", chromium)
	}
	path, res := failingReport(t)
	ctx, jsErrors := browser(t)

	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(chromedp.CSS("#v-0"))); err != nil {
		t.Fatalf("loading the report: %v", err)
	}
	word, first, target := text(t, ctx, "#verdict .word"), text(t, ctx, "#v-0"), text(t, ctx, "#verdict .target")
	v := res.Violations[0]
	if word != "FAIL" || !strings.Contains(first, string(v.Guarantee)) || !strings.Contains(first, v.Message) ||
		!strings.Contains(first, "known: etcd-io/etcd#15220") || !strings.Contains(target, "etcd 3.4.23") || !strings.Contains(target, "seed 5") {
		t.Fatalf("verdict %q, target %q, first violation %q: want FAIL, etcd 3.4.23 seed 5, %s: %s (known: etcd-io/etcd#15220)", word, target, first, v.Guarantee, v.Message)
	}
	if b, err := locate(ctx, "v-0"); err != nil || !b.Found || b.Top < 0 || b.Top >= b.ViewHeight {
		t.Fatalf("the first violation is not in view on load: %+v, %v", b, err)
	}
	screenshot(t, ctx, "1-loaded.png", false)

	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#v-0 a.ref"), "data-item"))
	item := attr.Value
	if err != nil || item == "" {
		t.Fatalf("the first violation has no link: %q, %v", item, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#v-0 a.ref"))); err != nil {
		t.Fatal(err)
	}
	b, err := locate(ctx, "i-"+item)
	if err != nil || !b.inView() || !b.Highlighted {
		t.Fatalf("after the violation's link, its item %s is not highlighted in view: %+v, %v", item, b, err)
	}
	if detail := text(t, ctx, "#detail-text"); !strings.Contains(detail, "watch 14 response") {
		t.Fatalf("the detail panel shows %q, not the watch response", detail)
	}
	screenshot(t, ctx, "2-violation-link.png", false)

	// "show on the timeline" draws and highlights every item the violation links to
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#v-0 button.showall"))); err != nil {
		t.Fatal(err)
	}
	missing, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#v-0 a.ref"))
		.map(a => a.dataset.item)
		.filter(id => { const el = document.getElementById("i-" + id); return !el || !el.classList.contains("hl"); })`))
	if err != nil || len(missing) > 0 {
		t.Fatalf("after show on the timeline, items not drawn highlighted: %v (%v)", missing, err)
	}
	screenshot(t, ctx, "3-show-all.png", false)

	// the key a write the violation links to names, filtered over the whole run
	key, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const ref = Array.from(document.querySelectorAll("#v-0 a.ref")).find(a => a.dataset.item.startsWith("op-"));
		const data = JSON.parse(document.getElementById("report-data").textContent);
		return data.items.find(it => it.id === ref.dataset.item).k[0];
	})()`))
	if err != nil || key == "" {
		t.Fatalf("no key of a write the violation links to: %q, %v", key, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#zoom-reset"))); err != nil {
		t.Fatal(err)
	}
	before, err := timeline(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#f-key"), key)); err != nil {
		t.Fatal(err)
	}
	after, err := timeline(ctx, key)
	if err != nil || after.Rows == 0 || after.Rows >= before.Rows || !after.AllMatch || before.AllMatch {
		t.Fatalf("filter by key %q: rows %d -> %d, every item naming it %v -> %v (%v)", key, before.Rows, after.Rows, before.AllMatch, after.AllMatch, err)
	}
	screenshot(t, ctx, "4-key-filter.png", false)

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#zoom-in"))); err != nil {
		t.Fatal(err)
	}
	zoomed, err := timeline(ctx, key)
	if err != nil || zoomed.Status == after.Status {
		t.Fatalf("zooming in left the window as it was: %q (%v)", zoomed.Status, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const f = document.getElementById("f-key");
		f.value = "";
		return f.dispatchEvent(new Event("input"));
	})()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#zoom-reset")), chromedp.Click(chromedp.CSS("#detail-close"))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "5-whole-page.png", true)
	if errs := jsErrors(); len(errs) > 0 {
		t.Fatalf("JavaScript errors: %q", errs)
	}

	// the collector sees an error thrown in the page
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`setTimeout(() => { throw new Error("probe") }, 0)`)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the error thrown in the page", func() bool { return len(jsErrors()) > 0 })
}

package picture

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// journeyDOT has every kind of node and edge that kubectl journey graph draws: a
// start point, plain text, rounded boxes (filled, dashed, thick, red for a missing
// Pathway), a hexagon, a double circle; solid, dashed, dotted and bold edges in four
// colors, and self loops.
const journeyDOT = `digraph "referral" {
  rankdir=LR;
  node [shape=box, style=rounded, fontname="Helvetica"];
  edge [fontname="Helvetica", fontsize=10];
  "(start)" [shape=point, width=0.15];
  "*" [label="any pathway (*)", shape=plaintext, fontcolor="#2563eb"];
  "booking" [label="booking", fillcolor="#fde68a", style="rounded,filled"];
  "escalation" [label="escalation"];
  "faq" [label="faq", style="rounded,dashed"];
  "intake" [label="intake", penwidth=2];
  "test" [label="test", shape=hexagon];
  "ghost" [label="ghost", color="#dc2626", fontcolor="#dc2626"];
  "(end)" [label="end", shape=doublecircle, width=0.3];
  "(start)" -> "intake";
  "*" -> "faq" [label="faq-detour", style=bold, color="#2563eb", fontcolor="#2563eb"];
  "booking" -> "booking" [label="onFailure (JumpBack)"];
  "booking" -> "test" [label="onSuccess"];
  "booking" -> "booking" [label="onPartialSuccess (decision)", style=dotted, color="#d97706", fontcolor="#d97706"];
  "booking" -> "escalation" [label="onPartialSuccess (decision)", style=dotted, color="#d97706", fontcolor="#d97706"];
  "booking" -> "booking" [label="reject-doctor", style=bold, color="#2563eb", fontcolor="#2563eb"];
  "intake" -> "booking" [label="next", style=dashed, color="#6b7280", fontcolor="#6b7280"];
  "test" -> "(end)" [label="onSuccess (Close)"];
  "test" -> "escalation" [label="onUnclear (decision)", style=dotted, color="#d97706", fontcolor="#d97706"];
  "escalation" -> "ghost";
}
`

// TestPNGDrawsWhatTheSVGDraws lays the same graph out as SVG and as PNG and checks the
// PNG's pixels against the SVG's geometry, which the test reads on its own: every
// stroked outline of a node and every edge line and arrowhead is inked in its color
// along its length, edges are lines and not filled shapes, and every label has ink
// where the SVG puts it.
func TestPNGDrawsWhatTheSVGDraws(t *testing.T) {
	ctx := context.Background()
	svg, err := Render(ctx, journeyDOT, SVG, nil)
	if err != nil {
		t.Fatal(err)
	}
	pic, err := Render(ctx, journeyDOT, PNG, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(pic))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	keep := filepath.Join(t.ArtifactDir(), "journey.png")
	if err := os.WriteFile(keep, pic, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the PNG is in %s (go test -artifacts keeps it)", keep)
		}
	}()

	g := readSVG(t, string(svg))
	const scale = 96.0 / 72 // Graphviz's -Tpng resolution
	if w, h := float64(img.Bounds().Dx()), float64(img.Bounds().Dy()); math.Abs(w-g.width*scale) > 1 || math.Abs(h-g.height*scale) > 1 {
		t.Fatalf("PNG is %gx%g pixels, want the SVG's %.2fx%.2f points at 96 dpi", w, h, g.width, g.height)
	}
	px := func(p pt) pt { return pt{(p.x + g.tx) * scale, (p.y + g.ty) * scale} }

	if len(g.strokes) < 30 || len(g.texts) < 15 {
		t.Fatalf("read %d strokes and %d texts from the SVG; the test no longer understands it", len(g.strokes), len(g.texts))
	}
	// Where each label is drawn, in pixels: its box is the font size tall above the
	// baseline, about half the font size wide per character, anchored as the SVG says.
	var labels []image.Rectangle
	for _, l := range g.texts {
		w := 0.5 * l.size * float64(len([]rune(l.text)))
		x0 := map[string]float64{"start": 0, "middle": -w / 2, "end": -w}[l.anchor]
		min, max := px(pt{l.at.x + x0, l.at.y - 0.7*l.size}), px(pt{l.at.x + x0 + w, l.at.y})
		labels = append(labels, image.Rect(int(min.x), int(min.y), int(math.Ceil(max.x)), int(math.Ceil(max.y))))
	}
	for _, s := range g.strokes {
		var pixels []pt
		for _, p := range s.points {
			pixels = append(pixels, px(p))
		}
		samples := resample(pixels, 2)
		// Along the stroke: its color within 1.5 pixels of each sample. A dash
		// pattern leaves gaps: "5,2" inks 5/7 of the length, "1,5" (dotted) 1/6.
		want := 0.9
		if s.kind == "arrowhead" {
			want = 0.5 // the arrowheads of nested self loops overlap
		}
		switch s.dash {
		case "":
		case "5,2":
			want = 0.6
		case "1,5":
			want = 0.25
		default:
			t.Fatalf("%s: unexpected stroke-dasharray %q", s.what, s.dash)
		}
		if got := coverage(img, samples, s.color, 1.5); got < want {
			t.Errorf("%s: %.0f%% of its %s outline is drawn, want at least %.0f%%", s.what, 100*got, s.kind, 100*want)
		}
		// Beside an edge's line: background. A line filled as a shape (from its
		// end back to its start) inks one side.
		if s.kind == "line" {
			left, right := beside(img, samples, s.color, 5*scale, labels)
			if worst := math.Max(left, right); worst > 0.3 {
				t.Errorf("%s: %.0f%% of the points 5pt beside its line are inked in its color: the edge is filled, not stroked", s.what, 100*worst)
			}
		}
	}
	for i, l := range g.texts {
		if got := inked(img, labels[i], l.color); got < 0.05 {
			t.Errorf("label %q: %.1f%% of its box is inked in its color, want at least 5%%", l.text, 100*got)
		}
	}
	again, err := Render(ctx, journeyDOT, PNG, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, pic) {
		t.Error("drawing the same graph twice gave two different PNGs")
	}
}

func TestRenderRefusesUnknownFormat(t *testing.T) {
	if _, err := Render(context.Background(), journeyDOT, "jpeg", nil); err == nil || !strings.Contains(err.Error(), `unsupported picture format "jpeg"`) {
		t.Errorf("got %v", err)
	}
}

type pt struct{ x, y float64 }

// stroke is an outline the SVG strokes: a node's shape, an edge's line or an
// arrowhead, in the SVG's user space.
type stroke struct {
	what   string // e.g. `edge "booking->test"`
	kind   string // "shape", "line" or "arrowhead"
	color  color.NRGBA
	dash   string
	points []pt
}

type label struct {
	text, anchor string
	at           pt
	size         float64
	color        color.NRGBA
}

type svgGeometry struct {
	width, height float64 // the viewBox
	tx, ty        float64 // the graph's translate
	strokes       []stroke
	texts         []label
}

var (
	viewBoxRE   = regexp.MustCompile(`viewBox="0\.00 0\.00 ([\d.]+) ([\d.]+)"`)
	translateRE = regexp.MustCompile(`class="graph" transform="scale\(1 1\) rotate\(0\) translate\(([\d.]+) ([\d.]+)\)"`)
	groupRE     = regexp.MustCompile(`(?s)<g id="[^"]*" class="(node|edge)[^"]*">\s*<title>(.*?)</title>(.*?)</g>`)
	elementRE   = regexp.MustCompile(`(?s)<(path|polygon|polyline|ellipse)\s([^>]*?)/>`)
	textRE      = regexp.MustCompile(`(?s)<text\s([^>]*)>(.*?)</text>`)
	attrRE      = regexp.MustCompile(`([\w-]+)="([^"]*)"`)
	numberRE    = regexp.MustCompile(`-?\d+(?:\.\d+)?`)
)

// readSVG reads what Graphviz's SVG draws, with regular expressions rather than the
// code under test: the strokes and labels of each node and edge group.
func readSVG(t *testing.T, svg string) svgGeometry {
	t.Helper()
	var g svgGeometry
	m := viewBoxRE.FindStringSubmatch(svg)
	tr := translateRE.FindStringSubmatch(svg)
	if m == nil || tr == nil {
		t.Fatalf("the SVG has no viewBox or graph transform:\n%s", svg)
	}
	g.width, g.height, g.tx, g.ty = num(t, m[1]), num(t, m[2]), num(t, tr[1]), num(t, tr[2])
	for _, grp := range groupRE.FindAllStringSubmatch(svg, -1) {
		class, title, body := grp[1], html.UnescapeString(grp[2]), grp[3]
		what := fmt.Sprintf("%s %q", class, title)
		arrowheads := 0
		for _, e := range elementRE.FindAllStringSubmatch(body, -1) {
			a := attrs(e[2])
			if a["stroke"] == "none" || a["stroke"] == "transparent" {
				continue
			}
			s := stroke{what: what, kind: "shape", color: hex(t, a["stroke"]), dash: a["stroke-dasharray"]}
			switch e[1] {
			case "path":
				if !regexp.MustCompile(`^M[-\d.]+,[-\d.]+C[-\d., ]+$`).MatchString(a["d"]) {
					t.Fatalf("%s: path %q is not a moveto and curvetos", what, a["d"])
				}
				s.points = bezier(nums(t, a["d"]))
				if class == "edge" {
					s.kind = "line"
				}
			case "polygon", "polyline":
				s.points = pairs(nums(t, a["points"]))
				if e[1] == "polygon" {
					s.points = append(s.points, s.points[0])
				}
				if class == "edge" {
					s.kind = "arrowhead"
					arrowheads++
				}
			case "ellipse":
				cx, cy, rx, ry := num(t, a["cx"]), num(t, a["cy"]), num(t, a["rx"]), num(t, a["ry"])
				if rx < 3 {
					continue // the start point: a dot too small to have an outline
				}
				for i := 0; i <= 64; i++ {
					th := 2 * math.Pi * float64(i) / 64
					s.points = append(s.points, pt{cx + rx*math.Cos(th), cy + ry*math.Sin(th)})
				}
			}
			g.strokes = append(g.strokes, s)
		}
		if class == "edge" && arrowheads != 1 {
			t.Fatalf("%s has %d arrowheads in the SVG", what, arrowheads)
		}
		for _, tx := range textRE.FindAllStringSubmatch(body, -1) {
			a := attrs(tx[1])
			c := a["fill"]
			if c == "" {
				c = "#000000"
			}
			g.texts = append(g.texts, label{
				text: html.UnescapeString(tx[2]), anchor: a["text-anchor"], at: pt{num(t, a["x"]), num(t, a["y"])},
				size: num(t, a["font-size"]), color: hex(t, c),
			})
		}
	}
	return g
}

func attrs(s string) map[string]string {
	a := map[string]string{}
	for _, m := range attrRE.FindAllStringSubmatch(s, -1) {
		a[m[1]] = m[2]
	}
	return a
}

func hex(t *testing.T, s string) color.NRGBA {
	t.Helper()
	switch s {
	case "black":
		return color.NRGBA{A: 255}
	case "white":
		return color.NRGBA{255, 255, 255, 255}
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		t.Fatalf("color %q", s)
	}
	return color.NRGBA{uint8(n >> 16), uint8(n >> 8), uint8(n), 255}
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func nums(t *testing.T, s string) []float64 {
	var out []float64
	for _, n := range numberRE.FindAllString(s, -1) {
		out = append(out, num(t, n))
	}
	return out
}

func pairs(v []float64) []pt {
	var out []pt
	for i := 0; i+1 < len(v); i += 2 {
		out = append(out, pt{v[i], v[i+1]})
	}
	return out
}

// bezier is a polyline along the cubic curves of "M p0 C p1 p2 p3 p4 p5 p6 ...".
func bezier(v []float64) []pt {
	p := pairs(v)
	out := []pt{p[0]}
	for i := 1; i+2 < len(p); i += 3 {
		a, b, c, d := p[i-1], p[i], p[i+1], p[i+2]
		for k := 1; k <= 32; k++ {
			s := float64(k) / 32
			u := 1 - s
			out = append(out, pt{
				u*u*u*a.x + 3*u*u*s*b.x + 3*u*s*s*c.x + s*s*s*d.x,
				u*u*u*a.y + 3*u*u*s*b.y + 3*u*s*s*c.y + s*s*s*d.y,
			})
		}
	}
	return out
}

// resample places points every step pixels along a polyline.
func resample(p []pt, step float64) []pt {
	out := []pt{p[0]}
	left := step
	for i := 1; i < len(p); i++ {
		a, b := p[i-1], p[i]
		seg := math.Hypot(b.x-a.x, b.y-a.y)
		for at := left; at <= seg; at += step {
			out = append(out, pt{a.x + (b.x-a.x)*at/seg, a.y + (b.y-a.y)*at/seg})
			left = at + step - seg
		}
		if seg < left {
			left -= seg
		}
	}
	return out
}

// ink tells whether a pixel is at least half way from white to c.
func ink(img image.Image, x, y int, c color.NRGBA) bool {
	if !(image.Point{x, y}.In(img.Bounds())) {
		return false
	}
	p := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
	if p.A < 128 {
		return false
	}
	d := func(a, b color.NRGBA) float64 {
		return math.Sqrt(sq(float64(a.R)-float64(b.R)) + sq(float64(a.G)-float64(b.G)) + sq(float64(a.B)-float64(b.B)))
	}
	return d(p, c) < d(color.NRGBA{255, 255, 255, 255}, c)/2
}

func sq(v float64) float64 { return v * v }

// coverage is the share of samples with a pixel inked in c within r pixels.
func coverage(img image.Image, samples []pt, c color.NRGBA, r float64) float64 {
	hit := 0
	for _, s := range samples {
	search:
		for y := int(math.Floor(s.y - r)); y <= int(math.Ceil(s.y+r)); y++ {
			for x := int(math.Floor(s.x - r)); x <= int(math.Ceil(s.x+r)); x++ {
				if math.Hypot(float64(x)+0.5-s.x, float64(y)+0.5-s.y) <= r+0.5 && ink(img, x, y, c) {
					hit++
					break search
				}
			}
		}
	}
	return float64(hit) / float64(len(samples))
}

// beside is the share of the points at distance d left and right of a line inked in
// c, leaving out the line's two ends (where the arrowhead and the nodes are) and the
// points on labels.
func beside(img image.Image, samples []pt, c color.NRGBA, d float64, labels []image.Rectangle) (left, right float64) {
	var nl, nr int
	side := func(p pt, hits, n *int) {
		q := image.Point{int(p.x), int(p.y)}
		for _, r := range labels {
			if q.In(r) {
				return
			}
		}
		*n++
		if ink(img, q.X, q.Y, c) {
			*hits++
		}
	}
	var hl, hr int
	for i := 1; i+1 < len(samples); i++ {
		a, b := samples[i-1], samples[i+1]
		if math.Hypot(samples[i].x-samples[0].x, samples[i].y-samples[0].y) < 3*d ||
			math.Hypot(samples[i].x-samples[len(samples)-1].x, samples[i].y-samples[len(samples)-1].y) < 3*d {
			continue
		}
		l := math.Hypot(b.x-a.x, b.y-a.y)
		if l == 0 {
			continue
		}
		nx, ny := -(b.y-a.y)/l, (b.x-a.x)/l
		side(pt{samples[i].x + d*nx, samples[i].y + d*ny}, &hl, &nl)
		side(pt{samples[i].x - d*nx, samples[i].y - d*ny}, &hr, &nr)
	}
	share := func(h, n int) float64 {
		if n == 0 {
			return 0
		}
		return float64(h) / float64(n)
	}
	return share(hl, nl), share(hr, nr)
}

// inked is the share of the pixels of r inked in c.
func inked(img image.Image, r image.Rectangle, c color.NRGBA) float64 {
	hit, all := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			all++
			if ink(img, x, y, c) {
				hit++
			}
		}
	}
	if all == 0 {
		return 0
	}
	return float64(hit) / float64(all)
}

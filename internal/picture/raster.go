package picture

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/fogleman/gg"
	"github.com/golang/freetype/truetype"
	"golang.org/x/image/colornames"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/gobolditalic"
	"golang.org/x/image/font/gofont/goitalic"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/goregular"
)

// pngDPI is the resolution of PNG pictures, Graphviz's own default for -Tpng: an SVG
// point (1/72 inch) becomes 96/72 pixels.
const pngDPI = 96

// rasterize draws an SVG written by Graphviz as a PNG image.
//
// go-graphviz's own PNG renderer cannot be used: its WebAssembly bridge reads the
// "filled" argument of every shape as true (the upper half of the 64-bit value is not
// cleared), so it fills edges into blobs and never strokes an outline. The SVG renderer
// runs inside Graphviz and is right, so PNG pictures are the SVG, rasterized.
//
// It reads the subset of SVG that Graphviz writes: groups with a transform, polygon,
// polyline, path (M, L, H, V, C and Z), ellipse and text, each with its own fill,
// stroke, stroke-width, stroke-dasharray and opacities. Text is set in the Go fonts,
// which are compiled in, so a picture is the same on every machine.
func rasterize(svg []byte, dpi float64) ([]byte, error) {
	d := xml.NewDecoder(bytes.NewReader(svg))
	d.Entity = xml.HTMLEntity
	r := &rasterizer{scale: dpi / 72, faces: map[faceKey]font.Face{}}
	// Each open element pushes the transform in force inside it.
	var stack []matrix
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading Graphviz's SVG: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			m := identity()
			if len(stack) > 0 {
				m = stack[len(stack)-1]
			}
			if tr := attr(t, "transform"); tr != "" {
				own, err := parseTransform(tr)
				if err != nil {
					return nil, err
				}
				m = m.mul(own)
			}
			stack = append(stack, m)
			if t.Name.Local == "svg" {
				if err := r.begin(t); err != nil {
					return nil, err
				}
				stack[len(stack)-1] = r.page
				continue
			}
			if r.dc == nil {
				continue
			}
			if t.Name.Local == "text" {
				var s string
				if err := d.DecodeElement(&s, &t); err != nil {
					return nil, fmt.Errorf("reading Graphviz's SVG: %w", err)
				}
				stack = stack[:len(stack)-1]
				r.text(t, m, s)
				continue
			}
			if err := r.shape(t, m); err != nil {
				return nil, err
			}
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if r.dc == nil {
		return nil, errors.New("reading Graphviz's SVG: no <svg> element")
	}
	var out bytes.Buffer
	if err := r.dc.EncodePNG(&out); err != nil {
		return nil, fmt.Errorf("encoding PNG: %w", err)
	}
	return out.Bytes(), nil
}

type rasterizer struct {
	scale float64
	dc    *gg.Context
	// page maps the SVG's user space (its viewBox) to pixels.
	page  matrix
	faces map[faceKey]font.Face
}

// begin sizes the image from the <svg> element's viewBox, or its width and height.
func (r *rasterizer) begin(t xml.StartElement) error {
	if r.dc != nil {
		return nil // a nested <svg>: not written by Graphviz
	}
	var minX, minY, w, h float64
	if vb := numbers(attr(t, "viewBox")); len(vb) == 4 {
		minX, minY, w, h = vb[0], vb[1], vb[2], vb[3]
	} else {
		w, h = length(attr(t, "width")), length(attr(t, "height"))
	}
	if w <= 0 || h <= 0 || w*h*r.scale*r.scale > 1<<28 {
		return fmt.Errorf("reading Graphviz's SVG: unusable picture size %gx%g", w, h)
	}
	r.dc = gg.NewContext(int(math.Ceil(w*r.scale)), int(math.Ceil(h*r.scale)))
	r.dc.SetLineCapButt()
	r.page = scaling(r.scale, r.scale).mul(translation(-minX, -minY))
	return nil
}

// shape fills then strokes one polygon, polyline, path or ellipse, as SVG paints them.
func (r *rasterizer) shape(t xml.StartElement, m matrix) error {
	dc := r.dc
	switch t.Name.Local {
	case "polygon", "polyline":
		p := numbers(attr(t, "points"))
		if len(p) < 4 {
			return nil
		}
		dc.MoveTo(m.apply(p[0], p[1]))
		for i := 2; i+1 < len(p); i += 2 {
			dc.LineTo(m.apply(p[i], p[i+1]))
		}
		if t.Name.Local == "polygon" {
			dc.ClosePath()
		}
	case "path":
		if err := r.path(attr(t, "d"), m); err != nil {
			return err
		}
	case "ellipse":
		cx, cy := number(attr(t, "cx")), number(attr(t, "cy"))
		rx, ry := number(attr(t, "rx")), number(attr(t, "ry"))
		// Four cubic arcs, each a quarter of the ellipse.
		const k = 0.5522847498307936
		dc.MoveTo(m.apply(cx+rx, cy))
		cubicTo(dc, m, cx+rx, cy+k*ry, cx+k*rx, cy+ry, cx, cy+ry)
		cubicTo(dc, m, cx-k*rx, cy+ry, cx-rx, cy+k*ry, cx-rx, cy)
		cubicTo(dc, m, cx-rx, cy-k*ry, cx-k*rx, cy-ry, cx, cy-ry)
		cubicTo(dc, m, cx+k*rx, cy-ry, cx+rx, cy-k*ry, cx+rx, cy)
		dc.ClosePath()
	default:
		return nil
	}
	// SVG's defaults: filled black, not stroked.
	if fill, ok := paint(attr(t, "fill"), "black", attr(t, "fill-opacity")); ok && t.Name.Local != "polyline" {
		dc.SetColor(fill)
		dc.FillPreserve()
	}
	if stroke, ok := paint(attr(t, "stroke"), "none", attr(t, "stroke-opacity")); ok {
		dc.SetColor(stroke)
		width := 1.0
		if w := attr(t, "stroke-width"); w != "" {
			width = number(w)
		}
		dc.SetLineWidth(width * m.scale())
		var dashes []float64
		for _, v := range numbers(attr(t, "stroke-dasharray")) {
			dashes = append(dashes, v*m.scale())
		}
		dc.SetDash(dashes...)
		dc.StrokePreserve()
	}
	dc.ClearPath()
	return nil
}

// path adds the outline of an SVG path's data: the absolute and relative forms of
// M, L, H, V, C and Z, which are all that Graphviz writes.
func (r *rasterizer) path(data string, m matrix) error {
	dc := r.dc
	var x, y, startX, startY float64
	cmd := byte(0)
	args := pathTokens(data)
	for i := 0; i < len(args); {
		if c := args[i]; len(c) == 1 && strings.ContainsAny(c, "MmLlHhVvCcZz") {
			cmd = c[0]
			i++
			if cmd == 'Z' || cmd == 'z' {
				dc.ClosePath()
				x, y = startX, startY
				continue
			}
		}
		n := map[byte]int{'M': 2, 'L': 2, 'H': 1, 'V': 1, 'C': 6}[upper(cmd)]
		if n == 0 {
			return fmt.Errorf("reading Graphviz's SVG: path command %q is not supported", string(cmd))
		}
		if i+n > len(args) {
			return fmt.Errorf("reading Graphviz's SVG: path command %q lacks numbers", string(cmd))
		}
		v := make([]float64, n)
		for j := range v {
			f, err := strconv.ParseFloat(args[i+j], 64)
			if err != nil {
				return fmt.Errorf("reading Graphviz's SVG: path %q: %w", data, err)
			}
			v[j] = f
		}
		i += n
		rel := cmd >= 'a'
		at := func(dx, dy float64) (float64, float64) {
			if rel {
				return x + dx, y + dy
			}
			return dx, dy
		}
		switch upper(cmd) {
		case 'M':
			x, y = at(v[0], v[1])
			startX, startY = x, y
			dc.NewSubPath()
			dc.MoveTo(m.apply(x, y))
			// Numbers after a moveto's first pair are linetos.
			cmd = map[bool]byte{true: 'l', false: 'L'}[rel]
		case 'L':
			x, y = at(v[0], v[1])
			dc.LineTo(m.apply(x, y))
		case 'H':
			if rel {
				x += v[0]
			} else {
				x = v[0]
			}
			dc.LineTo(m.apply(x, y))
		case 'V':
			if rel {
				y += v[0]
			} else {
				y = v[0]
			}
			dc.LineTo(m.apply(x, y))
		case 'C':
			x1, y1 := at(v[0], v[1])
			x2, y2 := at(v[2], v[3])
			x3, y3 := at(v[4], v[5])
			cubicTo(dc, m, x1, y1, x2, y2, x3, y3)
			x, y = x3, y3
		}
	}
	return nil
}

// text draws a label at its baseline, anchored as text-anchor says.
func (r *rasterizer) text(t xml.StartElement, m matrix, s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	fill, ok := paint(attr(t, "fill"), "black", attr(t, "fill-opacity"))
	if !ok {
		return
	}
	size := 14.0
	if v := attr(t, "font-size"); v != "" {
		size = number(v)
	}
	k := faceKey{
		family: fontFamily(attr(t, "font-family")),
		bold:   attr(t, "font-weight") == "bold",
		italic: attr(t, "font-style") == "italic",
		size:   size * m.scale(),
	}
	if k.size <= 0 {
		return
	}
	face, ok := r.faces[k]
	if !ok {
		face = k.face()
		r.faces[k] = face
	}
	ax := map[string]float64{"middle": 0.5, "end": 1}[attr(t, "text-anchor")]
	x, y := m.apply(number(attr(t, "x")), number(attr(t, "y")))
	r.dc.SetFontFace(face)
	r.dc.SetColor(fill)
	r.dc.DrawStringAnchored(s, x, y, ax, 0)
}

type faceKey struct {
	family       string
	bold, italic bool
	size         float64
}

// face is the Go font closest to the key: Go Mono for monospaced families, Go (a
// sans-serif) for the rest.
func (k faceKey) face() font.Face {
	ttf := goregular.TTF
	switch {
	case k.family == "mono":
		ttf = gomono.TTF
	case k.bold && k.italic:
		ttf = gobolditalic.TTF
	case k.bold:
		ttf = gobold.TTF
	case k.italic:
		ttf = goitalic.TTF
	}
	f, err := truetype.Parse(ttf)
	if err != nil {
		panic(err) // the fonts are compiled in
	}
	return truetype.NewFace(f, &truetype.Options{Size: k.size, DPI: 72, Hinting: font.HintingNone})
}

func fontFamily(v string) string {
	v = strings.ToLower(v)
	if strings.Contains(v, "mono") || strings.Contains(v, "courier") {
		return "mono"
	}
	return ""
}

// paint is the color of a fill or stroke attribute (def when absent), and false
// when nothing is to be painted.
func paint(v, def, opacity string) (color.Color, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = def
	}
	var c color.NRGBA
	switch {
	case v == "none" || v == "transparent" || strings.HasPrefix(v, "url("):
		return nil, false
	case strings.HasPrefix(v, "#"):
		h := v[1:]
		if len(h) == 3 {
			h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
		}
		n, err := strconv.ParseUint(h, 16, 32)
		if err != nil || len(h) != 6 {
			return nil, false
		}
		c = color.NRGBA{R: uint8(n >> 16), G: uint8(n >> 8), B: uint8(n), A: 255}
	default:
		named, ok := colornames.Map[strings.ToLower(v)]
		if !ok {
			return nil, false
		}
		c = color.NRGBA{R: named.R, G: named.G, B: named.B, A: 255}
	}
	if opacity != "" {
		c.A = uint8(math.Round(255 * math.Max(0, math.Min(1, number(opacity)))))
	}
	if c.A == 0 {
		return nil, false
	}
	return c, true
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// numbers are the numbers of a list separated by spaces and commas.
func numbers(s string) []float64 {
	var out []float64
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

func number(s string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v
}

// length is an SVG length in points: Graphviz writes "123pt"; px are 3/4 of a point.
func length(s string) float64 {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasSuffix(s, "pt"):
		return number(strings.TrimSuffix(s, "pt"))
	case strings.HasSuffix(s, "px"):
		return number(strings.TrimSuffix(s, "px")) * 0.75
	}
	return number(s)
}

// pathTokens splits path data into command letters and numbers ("M1,-2C3 4" gives
// M 1 -2 C 3 4).
func pathTokens(d string) []string {
	var out []string
	cur := strings.Builder{}
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	prev := rune(0)
	for _, c := range d {
		switch {
		case strings.ContainsRune("MmLlHhVvCcZzSsQqTtAa", c):
			flush()
			out = append(out, string(c))
		case c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
		case c == '-' && prev != 'e' && prev != 'E':
			flush()
			cur.WriteRune(c)
		case c == '.' && strings.Contains(cur.String(), ".") && !strings.ContainsAny(cur.String(), "eE"):
			flush()
			cur.WriteRune(c)
		default:
			cur.WriteRune(c)
		}
		prev = c
	}
	flush()
	return out
}

// cubicTo adds a cubic Bézier curve from the current point, through the control
// points (x1, y1) and (x2, y2) to (x3, y3), all in user space.
func cubicTo(dc *gg.Context, m matrix, x1, y1, x2, y2, x3, y3 float64) {
	ax, ay := m.apply(x1, y1)
	bx, by := m.apply(x2, y2)
	cx, cy := m.apply(x3, y3)
	dc.CubicTo(ax, ay, bx, by, cx, cy)
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// matrix is an affine transform: x' = a*x + c*y + e, y' = b*x + d*y + f.
type matrix struct{ a, b, c, d, e, f float64 }

func identity() matrix                { return matrix{a: 1, d: 1} }
func translation(x, y float64) matrix { return matrix{a: 1, d: 1, e: x, f: y} }
func scaling(x, y float64) matrix     { return matrix{a: x, d: y} }
func rotation(deg float64) matrix {
	s, c := math.Sincos(deg * math.Pi / 180)
	return matrix{a: c, b: s, c: -s, d: c}
}

// mul is m then n applied first: (m.mul(n)).apply(p) = m.apply(n.apply(p)).
func (m matrix) mul(n matrix) matrix {
	return matrix{
		a: m.a*n.a + m.c*n.b,
		b: m.b*n.a + m.d*n.b,
		c: m.a*n.c + m.c*n.d,
		d: m.b*n.c + m.d*n.d,
		e: m.a*n.e + m.c*n.f + m.e,
		f: m.b*n.e + m.d*n.f + m.f,
	}
}

func (m matrix) apply(x, y float64) (float64, float64) {
	return m.a*x + m.c*y + m.e, m.b*x + m.d*y + m.f
}

// scale is how much the transform scales lengths (line widths, font sizes).
func (m matrix) scale() float64 { return math.Sqrt(math.Abs(m.a*m.d - m.b*m.c)) }

// parseTransform reads an SVG transform list: matrix, translate, scale and rotate
// (about the origin or a point).
func parseTransform(s string) (matrix, error) {
	m := identity()
	rest := strings.TrimSpace(s)
	for rest != "" {
		open := strings.IndexByte(rest, '(')
		end := strings.IndexByte(rest, ')')
		if open < 0 || end < open {
			return m, fmt.Errorf("reading Graphviz's SVG: transform %q", s)
		}
		name := strings.TrimSpace(strings.TrimLeft(rest[:open], ", "))
		v := numbers(rest[open+1 : end])
		rest = strings.TrimSpace(rest[end+1:])
		var n matrix
		switch {
		case name == "matrix" && len(v) == 6:
			n = matrix{v[0], v[1], v[2], v[3], v[4], v[5]}
		case name == "translate" && len(v) == 1:
			n = translation(v[0], 0)
		case name == "translate" && len(v) == 2:
			n = translation(v[0], v[1])
		case name == "scale" && len(v) == 1:
			n = scaling(v[0], v[0])
		case name == "scale" && len(v) == 2:
			n = scaling(v[0], v[1])
		case name == "rotate" && len(v) == 1:
			n = rotation(v[0])
		case name == "rotate" && len(v) == 3:
			n = translation(v[1], v[2]).mul(rotation(v[0])).mul(translation(-v[1], -v[2]))
		default:
			return m, fmt.Errorf("reading Graphviz's SVG: transform %q", s)
		}
		m = m.mul(n)
	}
	return m, nil
}

// Package picture draws graphs written in Graphviz's DOT language as SVG or PNG with
// Graphviz itself, compiled to WebAssembly (github.com/goccy/go-graphviz): no dot binary,
// no network, the same layout everywhere. A PNG is the SVG rasterized in Go (see
// rasterize). kubectl journey graph and the console draw Journeys with it.
package picture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/goccy/go-graphviz"
)

// Format is an output format.
type Format string

const (
	// SVG is Scalable Vector Graphics.
	SVG Format = "svg"
	// PNG is a raster image.
	PNG Format = "png"
)

// Graph is a parsed DOT graph that Annotate functions may change before it is laid out:
// look nodes up by name and set their attributes (label, fillcolor, penwidth, ...).
type Graph = graphviz.Graph

// Node is a node of a Graph.
type Node = graphviz.Node

// mu serializes every Graphviz call: go-graphviz runs one WebAssembly instance per
// process, and it is not safe for concurrent use.
var mu sync.Mutex

// Render lays out the DOT graph src with Graphviz's dot layout and returns it in
// format. annotate, when not nil, may change the parsed graph first.
func Render(ctx context.Context, src string, format Format, annotate func(*Graph) error) ([]byte, error) {
	if format != SVG && format != PNG {
		return nil, fmt.Errorf("unsupported picture format %q; use svg or png", format)
	}
	mu.Lock()
	defer mu.Unlock()
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting Graphviz: %w", err)
	}
	defer gv.Close()
	g, err := graphviz.ParseBytes([]byte(src))
	if err != nil {
		return nil, fmt.Errorf("parsing DOT: %w", err)
	}
	if g == nil {
		return nil, errors.New("parsing DOT: no graph")
	}
	defer g.Close()
	if annotate != nil {
		if err := annotate(g); err != nil {
			return nil, err
		}
	}
	// PNG is the SVG, rasterized: see rasterize for why not Graphviz's PNG.
	var out bytes.Buffer
	if err := gv.Render(ctx, g, graphviz.SVG, &out); err != nil {
		return nil, fmt.Errorf("drawing with Graphviz: %w", err)
	}
	if format == PNG {
		return rasterize(out.Bytes(), pngDPI)
	}
	return out.Bytes(), nil
}

package engine

import (
	"github.com/google/cel-go/interpreter"
)

// lazy is an activation of one variable computed on first use.
type lazy struct {
	name string
	fn   func() any
}

func (l lazy) ResolveName(name string) (any, bool) {
	if name != l.name {
		return nil, false
	}
	return l.fn(), true
}

func (l lazy) Parent() interpreter.Activation { return nil }

package audit

import (
	"encoding/json"
	"fmt"
	"regexp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

// Redactor masks a journey's redaction patterns (spec.redact) in the text of records.
type Redactor struct {
	patterns []*regexp.Regexp
	mask     string
}

// NewRedactor compiles r (nil: a Redactor that masks nothing).
func NewRedactor(r *flowv1.Redaction) (*Redactor, error) {
	if r == nil {
		return nil, nil
	}
	x := &Redactor{mask: r.Mask}
	if x.mask == "" {
		x.mask = flowv1.DefaultRedactionMask
	}
	for i, p := range r.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("spec.redact.patterns[%d] %q: %w", i, p, err)
		}
		x.patterns = append(x.patterns, re)
	}
	return x, nil
}

// text is s with every match masked.
func (x *Redactor) text(s string) string {
	for _, re := range x.patterns {
		s = re.ReplaceAllLiteralString(s, x.mask)
	}
	return s
}

// json is raw with every match masked in its strings (object keys included).
func (x *Redactor) json(raw []byte) []byte {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return raw
	}
	out, err := json.Marshal(x.value(v))
	if err != nil {
		return raw
	}
	return out
}

func (x *Redactor) value(v any) any {
	switch t := v.(type) {
	case string:
		return x.text(t)
	case []any:
		for i := range t {
			t[i] = x.value(t[i])
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[x.text(k)] = x.value(e)
		}
		return out
	}
	return v
}

func (x *Redactor) ext(j *apiextensionsv1.JSON) {
	if j != nil {
		j.Raw = x.json(j.Raw)
	}
}

// Record masks r's text in place. A nil Redactor masks nothing.
func (x *Redactor) Record(r *Record) {
	if x == nil {
		return
	}
	if d := r.Decision; d != nil {
		d.Reasoning = x.text(d.Reasoning)
	}
	if a := r.Approval; a != nil {
		a.Reason = x.text(a.Reason)
	}
	if i := r.Intervention; i != nil {
		i.Reason = x.text(i.Reason)
	}
	if t := r.Transition; t != nil {
		t.Reason = x.text(t.Reason)
	}
	if a := r.Archive; a != nil {
		x.archive(a)
	}
	if e := r.Erasure; e != nil {
		e.Reason = x.text(e.Reason)
	}
}

func (x *Redactor) archive(a *Archive) {
	for i := range a.Transcript {
		e := &a.Transcript[i]
		e.User, e.Assistant = x.text(e.User), x.text(e.Assistant)
		for j := range e.ToolCalls {
			e.ToolCalls[j].Args, e.ToolCalls[j].Result = x.text(e.ToolCalls[j].Args), x.text(e.ToolCalls[j].Result)
		}
		if o := e.Outcome; o != nil {
			o.Message = x.text(o.Message)
			x.ext(o.Data)
		}
		if a := e.Approval; a != nil {
			a.Reason = x.text(a.Reason)
		}
	}
	for i := range a.Journal {
		res := &a.Journal[i].Result
		res.Reasoning, res.Reply = x.text(res.Reasoning), x.text(res.Reply)
		x.ext(res.Outputs)
		x.ext(res.ToolResult)
		for j := range res.ToolCalls {
			res.ToolCalls[j].Arguments = x.text(res.ToolCalls[j].Arguments)
		}
		if res.Failure != nil {
			res.Failure.Message = x.text(res.Failure.Message)
		}
	}
	for i := range a.History {
		a.History[i].Reason = x.text(a.History[i].Reason)
	}
	if a.LastDecision != nil {
		a.LastDecision.Reasoning = x.text(a.LastDecision.Reasoning)
	}
	for i := range a.ToolCalls {
		a.ToolCalls[i].Error = x.text(a.ToolCalls[i].Error)
	}
	if len(a.Context) > 0 {
		a.Context = x.json(a.Context)
	}
}

package validation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/journeyops/journey-operator/internal/testenv"
)

// TestAPIConventions checks the API types against the project's conventions: every
// serialized field of a spec or status type has a doc comment that starts with its
// JSON name and says +required or +optional; every user-facing string and list in a
// spec has a maximum length or size (the API server's CEL cost estimator needs them).
func TestAPIConventions(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "api", "v1alpha1", "*_types.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no API type files: %v", err)
	}
	specTypes := map[string]bool{}
	fields := map[string][]*ast.Field{}
	typeDocs := map[string]string{}
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := gd.Doc.Text()
				if ts.Doc != nil {
					doc = ts.Doc.Text()
				}
				typeDocs[ts.Name.Name] = doc
				if st, ok := ts.Type.(*ast.StructType); ok {
					fields[ts.Name.Name] = st.Fields.List
				}
			}
		}
	}
	// Spec types: everything reachable from the specs.
	var visit func(string)
	visit = func(name string) {
		if specTypes[name] {
			return
		}
		specTypes[name] = true
		for _, f := range fields[name] {
			if n := typeName(f.Type); fields[n] != nil {
				visit(n)
			}
		}
	}
	for _, root := range []string{"JourneySpec", "PathwaySpec", "SessionSpec", "BudgetSpec"} {
		visit(root)
	}

	for typ, list := range fields {
		for _, f := range list {
			if f.Tag == nil || len(f.Names) == 0 {
				continue // embedded TypeMeta, ObjectMeta, ListMeta
			}
			tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
			jsonName := strings.Split(tag, ",")[0]
			if jsonName == "" || jsonName == "-" {
				continue
			}
			where := typ + "." + f.Names[0].Name
			doc := f.Doc.Text()
			if !startsWithName(doc, jsonName) {
				t.Errorf("%s: the doc comment must start with its JSON name %q: %q", where, jsonName, firstLine(doc))
			}
			if strings.HasSuffix(typ, "List") {
				continue
			}
			required, optional := strings.Contains(doc, "+required"), strings.Contains(doc, "+optional")
			if required == optional {
				t.Errorf("%s: say exactly one of +required or +optional", where)
			}
			if !specTypes[typ] {
				continue
			}
			switch elem := typeName(f.Type); {
			case isList(f.Type):
				if !strings.Contains(doc, "+kubebuilder:validation:MaxItems=") {
					t.Errorf("%s: a list in a spec needs +kubebuilder:validation:MaxItems", where)
				}
				if elem == "string" && !strings.Contains(doc, "+kubebuilder:validation:items:MaxLength=") {
					t.Errorf("%s: a string list in a spec needs +kubebuilder:validation:items:MaxLength", where)
				}
			case elem == "string":
				if !strings.Contains(doc, "+kubebuilder:validation:MaxLength=") && !strings.Contains(doc, "+kubebuilder:validation:Enum=") {
					t.Errorf("%s: a string in a spec needs +kubebuilder:validation:MaxLength", where)
				}
			case elem != "" && typeDocs[elem] != "" && fields[elem] == nil && isStringType(typeDocs[elem]):
				// A named string type (Name, Confidence, ...) carries its own bounds.
				if !strings.Contains(typeDocs[elem], "MaxLength=") && !strings.Contains(typeDocs[elem], "Enum=") {
					t.Errorf("%s: type %s needs +kubebuilder:validation:MaxLength or an Enum", where, elem)
				}
			}
		}
	}
}

func isStringType(doc string) bool {
	return strings.Contains(doc, "+kubebuilder:validation:") || strings.Contains(doc, "string")
}

func isList(e ast.Expr) bool {
	_, ok := e.(*ast.ArrayType)
	return ok
}

// typeName is the name of a field's type, through pointers and slices.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.ArrayType:
		return typeName(t.Elt)
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}

// startsWithName reports whether doc starts with the word name ("name is", "name:",
// "name, when set").
func startsWithName(doc, name string) bool {
	rest, ok := strings.CutPrefix(doc, name)
	return ok && rest != "" && strings.ContainsRune(" :,.", rune(rest[0]))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

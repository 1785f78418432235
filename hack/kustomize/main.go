// Command kustomize builds a kustomization with the kustomize API (no kustomize
// binary) and prints it, with the manager image set: what `kustomize edit set image
// controller=IMG && kustomize build` would print, without editing any file.
//
//	go run ./hack/kustomize -image registry.example.com/journey-operator:v0.1.0 config/default | kubectl apply -f -
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	img := flag.String("image", "", "Manager image (name:tag or name@digest); empty keeps the kustomization's.")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: kustomize [-image IMG] DIR")
		os.Exit(2)
	}
	out, err := Build(flag.Arg(0), *img)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// Build renders dir, through an overlay that sets the image named controller (the
// manager's, in config/manager) to img.
func Build(dir, img string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fs := filesys.MakeFsOnDisk()
	target := abs
	if img != "" {
		overlay, err := os.MkdirTemp("", "journey-kustomize-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(overlay)
		rel, err := filepath.Rel(overlay, abs)
		if err != nil {
			return nil, err
		}
		k := fmt.Sprintf("resources:\n- %s\nimages:\n%s", rel, imageEntry(img))
		if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			return nil, err
		}
		target = overlay
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(fs, target)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// imageEntry is the kustomize images entries that set the manager's image to img: by
// its placeholder name controller, and by journey-operator, which config/manager
// already sets the placeholder to.
func imageEntry(img string) string {
	return imageFor("controller", img) + imageFor("journey-operator", img)
}

func imageFor(placeholder, img string) string {
	name, tag, digest := img, "", ""
	if n, d, ok := strings.Cut(name, "@"); ok {
		name, digest = n, d
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	e := fmt.Sprintf("- name: %s\n  newName: %s\n", placeholder, name)
	if digest != "" {
		return e + fmt.Sprintf("  digest: %s\n", digest)
	}
	if tag == "" {
		tag = "latest"
	}
	return e + fmt.Sprintf("  newTag: %q\n", tag)
}

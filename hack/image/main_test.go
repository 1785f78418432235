package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the image as `make image` does, from the real cmd/manager compiled by
// Compile, and inspects the tarball: its config runs /manager as a non-root user, and
// its layer holds the static binary and the CA bundle. `make test` runs this package
// with CGO_ENABLED=0 after `go vet` (also CGO_ENABLED=0) has compiled every package, so
// the build here reuses the cache and is mostly a link.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	if err := Compile(filepath.Join("..", ".."), "./cmd/manager", bin, runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	const tag = "registry.example.com/journey-operator:v0.1.0"
	if err := Build(Options{Binary: bin, CA: "/etc/ssl/certs/ca-certificates.crt", Tag: tag, Out: out, Arch: runtime.GOARCH, OS: "linux"}); err != nil {
		t.Fatal(err)
	}

	ref, _ := name.NewTag(tag)
	img, err := tarball.ImageFromPath(out, &ref)
	if err != nil {
		t.Fatalf("reading the tarball as %s: %v", tag, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) {
		t.Errorf("entrypoint %v, want [/manager]", cfg.Config.Entrypoint)
	}
	if cfg.Config.User != "65532:65532" || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("user %q, platform %s/%s", cfg.Config.User, cfg.OS, cfg.Architecture)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if h.Name == "manager" {
			staticELF(t, tr, h.Size)
		}
	}
	if h := files["manager"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("no executable /manager in the layer")
	}
	if h := files["etc/ssl/certs/ca-certificates.crt"]; h == nil || h.Size == 0 {
		t.Errorf("no CA bundle in the layer")
	}
}

// staticELF fails unless the binary asks for no dynamic loader (a scratch image has none)
// and is cmd/manager built with cgo off.
func staticELF(t *testing.T, r io.Reader, size int64) {
	t.Helper()
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/manager is not an ELF binary: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/manager is dynamically linked; build it with CGO_ENABLED=0")
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("/manager has no Go build info: %v", err)
	}
	if want := "github.com/journeyops/journey-operator/cmd/manager"; bi.Path != want {
		t.Errorf("/manager was built from %s, want %s", bi.Path, want)
	}
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" && s.Value != "0" {
			t.Errorf("/manager built with CGO_ENABLED=%s", s.Value)
		}
	}
}

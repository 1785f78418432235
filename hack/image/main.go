// Command image builds the manager's container image without Docker: a scratch image
// holding the static manager binary at /manager and the system's CA certificates
// (Debian's ca-certificates), run as a non-root user, written as a docker-archive
// tarball (the format of docker save, not an OCI image layout) that `crane push` (or
// `docker load`, `podman load`, `skopeo copy docker-archive:...`) takes.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Options describe the image.
type Options struct {
	Binary   string // the static manager binary
	CA       string // the CA bundle, PEM
	Tag      string // the reference written into the tarball, e.g. registry.example.com/journey-operator:v0.1.0
	Out      string // the tarball
	Arch, OS string
}

// Entrypoint is where the manager lives in the image.
const Entrypoint = "/manager"

// nonRoot is the user the manager runs as (distroless's nonroot).
const nonRoot = "65532:65532"

func main() {
	var o Options
	pkg := flag.String("package", "", "Build this package (e.g. ./cmd/manager) into -binary first, as Compile does.")
	flag.StringVar(&o.Binary, "binary", "bin/linux/manager", "Static manager binary (CGO_ENABLED=0).")
	flag.StringVar(&o.CA, "ca", "/etc/ssl/certs/ca-certificates.crt", "CA certificates bundle (Debian: apt-get install ca-certificates).")
	flag.StringVar(&o.Tag, "tag", "journey-operator:latest", "Image reference recorded in the tarball.")
	flag.StringVar(&o.Out, "out", "bin/journey-operator.tar", "Output tarball.")
	flag.StringVar(&o.Arch, "arch", "amd64", "Image architecture (the binary's GOARCH).")
	flag.StringVar(&o.OS, "os", "linux", "Image OS.")
	flag.Parse()
	if *pkg != "" {
		if err := Compile(".", *pkg, o.Binary, o.Arch); err != nil {
			fmt.Fprintln(os.Stderr, "image:", err)
			os.Exit(1)
		}
	}
	if err := Build(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", o.Out, "as", o.Tag)
}

// Compile builds the Go package pkg (relative to dir) into the static linux/arch binary
// out: CGO_ENABLED=0, so it needs no C library, and -ldflags='-s -w', which strips the
// symbol table and DWARF at link time. It deliberately leaves out -trimpath: that flag,
// like a cgo setting, changes every compiled package, whereas these flags match the
// CGO_ENABLED=0 `go test` run of `make test` (and `go vet`), so the image build reuses
// their cached packages and is mostly a link.
func Compile(dir, pkg, out, arch string) error {
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// Build writes the image tarball.
func Build(o Options) error {
	ref, err := name.ParseReference(o.Tag)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(o.CA)
	if err != nil {
		return fmt.Errorf("CA certificates: %w", err)
	}
	layerTar, err := rootfs(bin, ca)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = o.OS, o.Arch
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.User = nonRoot
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/journeyops/journey-operator"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(o.Out, ref, img)
}

// rootfs is the image's only layer: the binary, the CA bundle and a writable /tmp.
// Times are fixed so the same inputs give the same image digest.
func rootfs(bin, ca []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch}); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/ssl/certs/ca-certificates.crt", 0o644, ca},
		{Entrypoint[1:], 0o755, bin},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

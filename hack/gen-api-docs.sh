#!/usr/bin/env bash
# Regenerates docs/api.md, the API reference, from the Go types in api/v1alpha1 with
# crd-ref-docs (pinned as a tool in go.mod), its configuration docs/crd-ref-docs.yaml
# and the templates in docs/api-templates.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
go tool crd-ref-docs \
  --source-path=./api/v1alpha1 \
  --config=docs/crd-ref-docs.yaml \
  --templates-dir=docs/api-templates \
  --renderer=markdown \
  --output-path=docs/api.md \
  --log-level=WARN

// Package deploy holds the tests of the install paths: the Helm chart in dist/chart
// and the kustomizations config/default, config/scoped and config/self-cert are
// rendered with their Go libraries (no helm or kustomize binary), checked against what
// config/ generates, applied to a real control plane, and the manager binary is run
// with the chart's arguments and the chart's RBAC in namespace-scoped mode and with a
// certificate it provisions itself.
package deploy

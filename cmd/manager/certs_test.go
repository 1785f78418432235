package main

import (
	"flag"
	"testing"
)

// TestWebhookCertificateFlags: mounted (the default) needs nothing more; self needs the
// Secret and the Service as NAMESPACE/NAME and both webhook configurations; anything
// else is refused.
func TestWebhookCertificateFlags(t *testing.T) {
	parse := func(args ...string) certFlags {
		var f flags
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.certs
	}
	if p, err := parse().provisioner(); p != nil || err != nil {
		t.Errorf("by default: %v, %v; want the mounted certificate", p, err)
	}
	self := []string{"--webhook-certificate=self", "--webhook-cert-secret=ops/cert", "--webhook-service=ops/hooks",
		"--mutating-webhook-configuration=m", "--validating-webhook-configuration=v"}
	if p, err := parse(self...).provisioner(); p == nil || err != nil {
		t.Errorf("self with every name: %v, %v", p, err)
	}
	for name, args := range map[string][]string{
		"an unknown source":       {"--webhook-certificate=cert-manager"},
		"a Secret with no ns":     append(append([]string{}, self...), "--webhook-cert-secret=cert"),
		"a Service with no name":  append(append([]string{}, self...), "--webhook-service=ops/"),
		"no validating webhook":   append(append([]string{}, self...), "--validating-webhook-configuration="),
		"a Secret with two parts": append(append([]string{}, self...), "--webhook-cert-secret=a/b/c"),
	} {
		if _, err := parse(args...).provisioner(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

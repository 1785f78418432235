package v1alpha1

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestDefaultBoundIsUnder256KiB(t *testing.T) {
	if n := (Limits{}).MaxObjectBytes(); n >= 256*1024 {
		t.Errorf("a Session with the default limits may take %d bytes", n)
	}
	// The largest limits the API allows still stay under etcd's request limit.
	largest := Limits{MaxContextBytes: 524288, MaxTranscriptBytes: new(int32(131072))}
	if n := largest.MaxObjectBytes(); n >= 1536*1024 {
		t.Errorf("a Session with the largest limits may take %d bytes", n)
	}
	// A journey's own transcript bound counts, not the default's.
	if largest.MaxObjectBytes()-(Limits{MaxContextBytes: 524288}).MaxObjectBytes() != 131072-16384 {
		t.Errorf("the bound ignores limits.maxTranscriptBytes")
	}
}

func TestOutcomesBytes(t *testing.T) {
	outcomes := []ExternalOutcome{
		{Pathway: "billing", Message: "paid", Data: &apiextensionsv1.JSON{Raw: []byte(`{"amount":12}`)}},
		{Pathway: "kyc"},
	}
	if got, want := OutcomesBytes(outcomes), (7+4+13+OutcomeOverheadBytes)+(3+OutcomeOverheadBytes); got != want {
		t.Errorf("OutcomesBytes = %d, want %d", got, want)
	}
}

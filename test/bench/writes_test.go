package main

import "testing"

func TestSessionWrites(t *testing.T) {
	metrics := []byte(`# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="flow.journey.dev",resource="sessions",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 41
apiserver_request_total{code="409",component="apiserver",dry_run="",group="flow.journey.dev",resource="sessions",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="flow.journey.dev",resource="sessions",scope="resource",subresource="",verb="PATCH",version="v1alpha1"} 20
apiserver_request_total{code="201",component="apiserver",dry_run="",group="flow.journey.dev",resource="sessions",scope="resource",subresource="",verb="POST",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="flow.journey.dev",resource="sessions",scope="resource",subresource="status",verb="UPDATE",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="PATCH",version="v1"} 99
apiserver_request_total{code="200",component="apiserver",dry_run="",group="flow.journey.dev",resource="sessions",scope="namespace",subresource="",verb="LIST",version="v1alpha1"} 5
`)
	got, err := sessionWrites(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if want := (writeCounts{Spec: 20, Status: 42}); got != want {
		t.Errorf("sessionWrites = %+v, want %+v (2xx PATCH/UPDATE of sessions; status subresource apart)", got, want)
	}
}

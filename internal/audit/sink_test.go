package audit

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	collectorlogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	flowv1 "github.com/journeyops/journey-operator/api/v1alpha1"
)

func sampleRecords() []Record {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	s := SessionRef{Namespace: "clinic", Name: "referral-7f3k", UID: "u-1"}
	return []Record{
		{Schema: Schema, ID: "u-1/3/0", Kind: KindApproval, Time: at, Session: s, Step: 3, Actor: "alice",
			Approval: &Approval{DecisionID: "d-2", Approve: true}},
		{Schema: Schema, ID: "u-1/3/1", Kind: KindPhase, Time: at, Session: s, Step: 3, Actor: Operator,
			Phase: &PhaseChange{From: "AwaitingApproval", To: "Completed"}},
	}
}

func TestJSONLinesAppendsOneLineARecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	for range 2 {
		j, err := OpenJSONLines(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Write(context.Background(), sampleRecords()); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4 (two writes of two records, appended)", len(lines))
	}
	var r Record
	if err := json.Unmarshal([]byte(lines[3]), &r); err != nil || r.ID != "u-1/3/1" || r.Phase.To != "Completed" || r.Schema != "journey.audit/v1" {
		t.Errorf("last line %s (%v)", lines[3], err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestOTLPSendsEachRecordAsALogRecord runs the OTLP sink against an OTLP/HTTP logs
// receiver: each record is one log record whose body is the record's JSON, with its
// id and kind as attributes; a receiver that refuses makes Write fail.
func TestOTLPSendsEachRecordAsALogRecord(t *testing.T) {
	var mu sync.Mutex
	var got []*collectorlogs.ExportLogsServiceRequest
	refuse := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		raw, _ := io.ReadAll(body)
		var req collectorlogs.ExportLogsServiceRequest
		if r.URL.Path != "/v1/logs" || proto.Unmarshal(raw, &req) != nil {
			http.Error(w, "want an OTLP logs export", http.StatusBadRequest)
			return
		}
		got = append(got, &req)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectorlogs.ExportLogsServiceResponse{})
		_, _ = io.Copy(w, bytes.NewReader(out))
	}))
	defer srv.Close()
	ctx := context.Background()
	sink, err := NewOTLP(ctx, otlploghttp.WithEndpointURL(srv.URL+"/v1/logs"), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sink.Shutdown(ctx) }()
	if err := sink.Write(ctx, sampleRecords()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 {
		t.Fatalf("%d exports, want 1", len(got))
	}
	var ids []string
	for _, rl := range got[0].ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				var r Record
				if err := json.Unmarshal([]byte(lr.Body.GetStringValue()), &r); err != nil {
					t.Fatalf("body %v: %v", lr.Body, err)
				}
				attrs := map[string]string{}
				for _, kv := range lr.Attributes {
					attrs[kv.Key] = kv.Value.GetStringValue()
				}
				if attrs["journey.audit.id"] != r.ID || attrs["journey.audit.kind"] != string(r.Kind) || lr.EventName != EventName ||
					lr.TimeUnixNano != uint64(r.Time.UnixNano()) {
					t.Errorf("log record %v for %+v", lr, r)
				}
				ids = append(ids, r.ID)
			}
		}
	}
	if strings.Join(ids, ",") != "u-1/3/0,u-1/3/1" {
		t.Errorf("exported %v", ids)
	}
	refuse = true
	mu.Unlock()
	if err := sink.Write(ctx, sampleRecords()); err == nil {
		t.Error("a refused export was counted written")
	}
}

func TestRedactorMasksRecordsAndArchives(t *testing.T) {
	if _, err := NewRedactor(&flowv1.Redaction{Patterns: []string{"ok", "("}}); err == nil || !strings.Contains(err.Error(), "spec.redact.patterns[1]") {
		t.Errorf("an invalid pattern: %v, want an error naming spec.redact.patterns[1]", err)
	}
	x, err := NewRedactor(&flowv1.Redaction{Patterns: []string{`INS-[0-9]{6}`}, Mask: "***"})
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Decision: &Decision{Reasoning: "INS-123456 is covered"}, Archive: &Archive{
		Transcript: []flowv1.Exchange{{User: "my id is INS-123456", Assistant: "noted INS-123456",
			ToolCalls: []flowv1.ExchangeToolCall{{Tool: "t", Args: `{"id":"INS-123456"}`}}}},
		Journal: []flowv1.EffectRecord{{Result: flowv1.AgentResult{Outputs: &apiextensionsv1.JSON{Raw: []byte(`{"ids":["INS-123456"]}`)}}}},
		Context: json.RawMessage(`{"insurance_id":"INS-123456","n":1}`),
	}}
	x.Record(&r)
	raw, _ := json.Marshal(r)
	if strings.Contains(string(raw), "INS-123456") || strings.Count(string(raw), "***") != 6 {
		t.Errorf("redacted record %s", raw)
	}
	var nilRedactor *Redactor
	nilRedactor.Record(&r) // masks nothing, does not panic
}

package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// JSONLines writes each record as one line of JSON to a file or to standard output.
type JSONLines struct {
	mu sync.Mutex
	w  io.Writer
	// file, when set, is synced after each write: a record is on disk before it
	// counts as written.
	file *os.File
}

// NewJSONLines writes records to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// OpenJSONLines appends records to the file at path (created, mode 0600, when
// missing), or writes them to standard output when path is "-".
func OpenJSONLines(path string) (*JSONLines, error) {
	if path == "-" {
		return &JSONLines{w: os.Stdout}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &JSONLines{w: f, file: f}, nil
}

// Write writes records, one line each, in one write, then syncs a file.
func (j *JSONLines) Write(_ context.Context, records []Record) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range records {
		if err := enc.Encode(&records[i]); err != nil {
			return err
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.w.Write(buf.Bytes()); err != nil {
		return err
	}
	if j.file != nil {
		return j.file.Sync()
	}
	return nil
}

// Close closes the file, if any.
func (j *JSONLines) Close() error {
	if j.file != nil {
		return j.file.Close()
	}
	return nil
}

// Sinks writes to each of its sinks in turn; it fails when one fails (the records
// are then written again to all of them).
type Sinks []Sink

// Write writes records to every sink.
func (s Sinks) Write(ctx context.Context, records []Record) error {
	var errs []error
	for _, sink := range s {
		if err := sink.Write(ctx, records); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

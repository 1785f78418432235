package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"
)

// status.journal and status.history are stored one JSON string an entry: the API
// server decodes, validates, coerces, tracks and encodes every value of a Session on
// each write, so an entry kept as one string costs it one value instead of a dozen,
// and an LLM Session's journal of answers and history of transitions no longer
// multiply the cost of its writes (docs/PERFORMANCE.md, "The journal stored one
// string an answer" and "The history stored one string a transition"). In Go they
// are SessionStatus.Journal and SessionStatus.History, decoded; SessionStatus's JSON
// methods below are the only place that sees the strings.

// The schema of an entry has no type and keeps what it holds: a schema of type
// string would have the API server prune an entry an earlier operator stored as a
// JSON object to {} when it reads the Session after the CRD is upgraded.

// EncodedEntry is one entry of status.journal (an EffectRecord) or status.history
// (a HistoryEntry) as stored: the entry encoded as a JSON object, in a string. An
// entry stored as a JSON object (by an operator that did not encode entries yet) is
// kept and read as is.
// +kubebuilder:validation:Type=""
// +kubebuilder:pruning:PreserveUnknownFields
type EncodedEntry string

// UnmarshalJSON takes the string, or an entry stored as a JSON object by an operator
// that did not encode it yet.
func (e *EncodedEntry) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		*e = EncodedEntry(b)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*e = EncodedEntry(s)
	return nil
}

// encodeEntry is v as status.journal and status.history store an entry.
func encodeEntry(v any) (EncodedEntry, error) {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	b, err := e.encode(v)
	if err != nil {
		return "", err
	}
	return EncodedEntry(b), nil
}

// JournalEntryBytes is what rec takes in status.journal as stored: the JSON string
// of its encoding, quotes and escapes included, and a separator. The journal's byte
// bound (MaxJournalBytes) counts its entries with it.
func JournalEntryBytes(rec *EffectRecord) int { return entryBytes(rec) }

// HistoryEntryBytes is what h takes in status.history as stored, as
// JournalEntryBytes counts an answer. The history's byte bound (MaxHistoryBytes)
// counts its entries with it.
func HistoryEntryBytes(h *HistoryEntry) int { return entryBytes(h) }

// entryBytes is what v takes in a list of encoded entries: the JSON string of its
// encoding, quotes and escapes included, and a separator. It encodes v once, into a
// reused buffer, and counts the quoted string without writing it.
func entryBytes(v any) int {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	b, err := e.encode(v)
	if err != nil {
		return 0
	}
	return quotedLen(b) + 1
}

// encoder encodes entries into a buffer it reuses: a list's entries are encoded one
// after another on each append and each write.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// encode is v as json.Marshal encodes it, valid until the next call.
func (e *encoder) encode(v any) ([]byte, error) {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte("\n")), nil
}

// quotedLen is the length of b encoded as a JSON string by encoding/json, quotes
// included: '"' and '\\' and \b \f \n \r \t take two bytes; other control bytes,
// '<', '>', '&', U+2028, U+2029 and invalid UTF-8 take six (\uXXXX).
func quotedLen(b []byte) int {
	n := 2
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// sessionStatusFields is SessionStatus without its JSON methods.
type sessionStatusFields SessionStatus

// MarshalJSON writes the status with its journal and history encoded, one string an
// entry.
func (s SessionStatus) MarshalJSON() ([]byte, error) {
	p := sessionStatusFields(s)
	var err error
	p.Journal, p.History = nil, nil
	if p.JournalEntries, err = encodeEntries(s.Journal, "journal"); err != nil {
		return nil, err
	}
	if p.HistoryEntries, err = encodeEntries(s.History, "history"); err != nil {
		return nil, err
	}
	return json.Marshal(&p)
}

// UnmarshalJSON reads the status and decodes its journal and history.
func (s *SessionStatus) UnmarshalJSON(b []byte) error {
	var p sessionStatusFields
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var err error
	if p.Journal, err = decodeEntries[EffectRecord](p.JournalEntries, "journal"); err != nil {
		return err
	}
	if p.History, err = decodeEntries[HistoryEntry](p.HistoryEntries, "history"); err != nil {
		return err
	}
	p.JournalEntries, p.HistoryEntries = nil, nil
	*s = SessionStatus(p)
	return nil
}

// encodeEntries is list as stored in status.<name>: nil when empty.
func encodeEntries[T any](list []T, name string) ([]EncodedEntry, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]EncodedEntry, len(list))
	for i := range list {
		e, err := encodeEntry(&list[i])
		if err != nil {
			return nil, fmt.Errorf("status.%s[%d]: %w", name, i, err)
		}
		out[i] = e
	}
	return out, nil
}

// decodeEntries is status.<name> as stored, decoded: nil when empty.
func decodeEntries[T any](stored []EncodedEntry, name string) ([]T, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	out := make([]T, len(stored))
	for i, e := range stored {
		if err := json.Unmarshal([]byte(e), &out[i]); err != nil {
			return nil, fmt.Errorf("status.%s[%d]: %w", name, i, err)
		}
	}
	return out, nil
}

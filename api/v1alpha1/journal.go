package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"
)

// status.journal is stored one JSON string an answer: the API server decodes,
// validates, coerces, tracks and encodes every value of a Session on each write, so
// an answer kept as one string costs it one value instead of a dozen, and an LLM
// Session's journal of answers no longer doubles the cost of its writes
// (docs/PERFORMANCE.md, "The journal stored one string an answer"). In Go the journal
// is SessionStatus.Journal, decoded; SessionStatus's JSON methods below are the only
// place that sees the strings.

// The schema of an answer has no type and keeps what it holds: a schema of type
// string would have the API server prune an answer an earlier operator stored as a
// JSON object to {} when it reads the Session after the CRD is upgraded.

// EncodedEffect is one answer of status.journal as stored: an EffectRecord
// encoded as a JSON object, in a string. An answer stored as a JSON object
// (by an operator that did not encode answers yet) is kept and read as is.
// +kubebuilder:validation:Type=""
// +kubebuilder:pruning:PreserveUnknownFields
type EncodedEffect string

// UnmarshalJSON takes the string, or an answer stored as a JSON object by an operator
// that did not encode it yet.
func (e *EncodedEffect) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		*e = EncodedEffect(b)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*e = EncodedEffect(s)
	return nil
}

// EncodeEffect is rec as status.journal stores it.
func EncodeEffect(rec *EffectRecord) (EncodedEffect, error) {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	b, err := e.encode(rec)
	if err != nil {
		return "", err
	}
	return EncodedEffect(b), nil
}

// JournalEntryBytes is what rec takes in status.journal as stored: the JSON string
// of its encoding, quotes and escapes included, and a separator. The journal's byte
// bound (MaxJournalBytes) counts its entries with it. It encodes rec once, into a
// reused buffer, and counts the quoted string without writing it.
func JournalEntryBytes(rec *EffectRecord) int {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	b, err := e.encode(rec)
	if err != nil {
		return 0
	}
	return quotedLen(b) + 1
}

// encoder encodes answers into a buffer it reuses: a journal's answers are encoded
// one after another on each append and each write.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// encode is rec as json.Marshal encodes it, valid until the next call.
func (e *encoder) encode(rec *EffectRecord) ([]byte, error) {
	e.buf.Reset()
	if err := e.enc.Encode(rec); err != nil {
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

// MarshalJSON writes the status with its journal encoded, one string an answer.
func (s SessionStatus) MarshalJSON() ([]byte, error) {
	p := sessionStatusFields(s)
	p.Journal = nil
	if len(s.Journal) > 0 {
		p.JournalEntries = make([]EncodedEffect, len(s.Journal))
		for i := range s.Journal {
			e, err := EncodeEffect(&s.Journal[i])
			if err != nil {
				return nil, fmt.Errorf("status.journal[%d]: %w", i, err)
			}
			p.JournalEntries[i] = e
		}
	}
	return json.Marshal(&p)
}

// UnmarshalJSON reads the status and decodes its journal.
func (s *SessionStatus) UnmarshalJSON(b []byte) error {
	var p sessionStatusFields
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if len(p.JournalEntries) > 0 {
		p.Journal = make([]EffectRecord, len(p.JournalEntries))
		for i, e := range p.JournalEntries {
			if err := json.Unmarshal([]byte(e), &p.Journal[i]); err != nil {
				return fmt.Errorf("status.journal[%d]: %w", i, err)
			}
		}
	}
	p.JournalEntries = nil
	*s = SessionStatus(p)
	return nil
}

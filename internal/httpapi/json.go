package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
)

// Blocking queries wait at most this long (default, and cap).
const (
	defaultQueryWait = 5 * time.Minute
	maxQueryWait     = 10 * time.Minute
)

// WriteJSON answers v, with index as X-Drover-Index when there is one.
func WriteJSON(w http.ResponseWriter, index int64, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if index > 0 {
		w.Header().Set("X-Drover-Index", strconv.FormatInt(index, 10))
	}
	// Compact: indenting doubles the encoding cost of large lists; the CLI
	// pretty-prints its own -o json.
	return json.NewEncoder(w).Encode(v)
}

// ReadBody reads a request body up to inputlimit.MaxBytes; a larger body is
// a 413, one that does not arrive within the body read timeout a 408.
// Every body the API takes is JSON: one nested deeper than
// inputlimit.MaxDepth is a 400 before anything parses it.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, inputlimit.MaxBytes)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var late *bodyTimeoutError
		switch {
		case errors.As(err, &mbe):
			return nil, &Error{Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("request body is larger than the %d byte limit", inputlimit.MaxBytes)}
		case errors.As(err, &late):
			return nil, &Error{Status: http.StatusRequestTimeout, Message: fmt.Sprintf(
				"the request body did not arrive within %s (%d bytes came); nothing was applied: send the request again, over a faster connection", late.timeout, len(b))}
		}
		return nil, BadRequest("cannot read request body: %v", err)
	}
	if err := inputlimit.JSON(b); err != nil {
		return nil, BadRequest("the body %v", err)
	}
	return b, nil
}

// DecodeStrict decodes a JSON body into v, refusing unknown fields, wrong
// types and data after the object with a 400 that says what was expected
// ("an allocation status update") and where the problem is.
func DecodeStrict(body []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return BadRequest("the body is not %s: %s", what, JSONErrorAt(body, err))
	}
	if dec.More() {
		return BadRequest("the body has data after the JSON object")
	}
	return nil
}

// JSONErrorAt adds a line:col to a JSON error when it knows the offset.
func JSONErrorAt(body []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(body)) {
		return err.Error()
	}
	line, col := 1, 1
	for _, c := range body[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%d:%d: %v", line, col, err)
}

// PathName reads a path segment that names a job, node or alloc and checks
// it against the allow-list before it can reach a registry key.
func PathName(r *http.Request, key, what string) (string, error) {
	v := r.PathValue(key)
	if msg := spec.CheckName(v); msg != "" {
		return "", BadRequest("%s %s", what, msg)
	}
	return v, nil
}

// QueryOptions reads a blocking query's ?index=N&wait=D.
func QueryOptions(r *http.Request) (int64, time.Duration, error) {
	q := r.URL.Query()
	var index int64
	if s := q.Get("index"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, BadRequest("index must be a non-negative integer, got %q", s)
		}
		index = v
	}
	wait := defaultQueryWait
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, 0, BadRequest("wait must be a duration such as \"30s\", got %q", s)
		}
		wait = min(d, maxQueryWait)
	}
	return index, wait, nil
}

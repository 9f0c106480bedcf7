package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/drover-org/drover/internal/link"
)

// HandlerFunc is an API handler that returns its error instead of writing
// it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Authorize admits a request before its handler reads anything: it returns
// the request to serve (carrying who made it) and what to call when the
// request ends, or the error that refuses it.
type Authorize func(r *http.Request) (*http.Request, func(), error)

// ErrHijacked is a handler's "I took the connection over" (exec).
var ErrHijacked = errors.New("connection hijacked")

// Handle is the single door every API request passes through: panic
// recovery, the authorization hook, ?consistent, and error rendering. log
// hears panics and 5xx answers.
//
// A request whose context is cancelled with an *Error as its cause (a
// token deleted while the request ran) gets that error if it has not begun
// its answer, and just ends if it has (a stream already answering).
func Handle(log *slog.Logger, authorize Authorize, h HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("panic in handler", "path", r.URL.Path, "panic", p)
				WriteError(w, http.StatusInternalServerError, "internal error", nil)
			}
		}()
		ar, done, err := authorize(r)
		defer done()
		if ar != nil && ar.URL.Query().Has("consistent") {
			ar = ar.WithContext(context.WithValue(ar.Context(), consistentRead{}, true))
		}
		rw := &answerWriter{ResponseWriter: w}
		if err == nil {
			err = h(rw, ar)
		}
		if err == ErrHijacked {
			return // the handler took the connection over and has answered
		}
		if err == link.ErrParked {
			return // the link runs the request again when it wakes
		}
		var ended *Error
		if ar != nil && errors.As(context.Cause(ar.Context()), &ended) {
			if !rw.answered {
				WriteError(w, ended.Status, ended.Message, ended.Problems)
			}
			return
		}
		if err != nil {
			status, msg, problems := StatusOf(err)
			// A body that came too slowly cancels the request's context
			// too (net/http does on any failed read of the connection), but
			// its client is still there to be told.
			if r.Context().Err() != nil && status != http.StatusRequestTimeout {
				return // the client went away (or we are shutting down): nobody to answer
			}
			if status >= 500 {
				log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			WriteError(w, status, msg, problems)
		}
	})
}

// consistentRead marks the context of a request with ?consistent.
type consistentRead struct{}

// ConsistentRead reports whether ctx is a request's that asked, with
// ?consistent, for every write acknowledged before it.
func ConsistentRead(ctx context.Context) bool { return ctx.Value(consistentRead{}) != nil }

// answerWriter notes whether a handler began its answer.
type answerWriter struct {
	http.ResponseWriter
	answered bool
}

func (a *answerWriter) WriteHeader(code int) {
	a.answered = true
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(b []byte) (int, error) {
	a.answered = true
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach the connection (Flush,
// deadlines).
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// LogRequests logs each request h serves, at debug level.
func LogRequests(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Debug("request", "method", r.Method, "path", r.URL.Path)
		h.ServeHTTP(w, r)
	})
}

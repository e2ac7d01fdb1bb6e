package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/google/uuid"
)

// HeaderIdempotencyKey makes a retried POST /orders return the first answer.
const HeaderIdempotencyKey = "Idempotency-Key"

// postOrder handles POST /orders.
func (s *Server) postOrder(w http.ResponseWriter, r *http.Request) {
	w, r, end := traceOrder(w, r)
	defer end()
	o, err := s.readOrder(w, r)
	if err != nil {
		s.metrics.orders.WithLabelValues("invalid").Inc()
		s.fail(w, r, err)
		return
	}
	a, err := s.store.create(r.Context(), o)
	switch {
	case errors.Is(err, errDuplicateOrder):
		s.metrics.orders.WithLabelValues("duplicate").Inc()
		writeError(w, http.StatusConflict, "an order with this id exists already")
		return
	case errors.Is(err, errKeyReused):
		s.metrics.orders.WithLabelValues("key_reused").Inc()
		writeError(w, http.StatusUnprocessableEntity, "Idempotency-Key was used before with a different request")
		return
	case err != nil:
		s.metrics.orders.WithLabelValues("failed").Inc()
		s.fail(w, r, err)
		return
	}
	if a.replayed {
		s.metrics.orders.WithLabelValues("replayed").Inc()
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		s.metrics.orders.WithLabelValues("created").Inc()
	}
	w.Header().Set("Location", "/orders/"+url.PathEscape(a.body.ID))
	writeJSON(w, a.status, a.body)
}

// readOrder checks the headers, reads at most MaxBodyBytes and decodes the
// body into what create writes.
func (s *Server) readOrder(w http.ResponseWriter, r *http.Request) (newOrder, error) {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return newOrder{}, err
	}
	var key *idempotencyKey
	if vs, ok := r.Header[HeaderIdempotencyKey]; ok {
		if len(vs) != 1 {
			return newOrder{}, badInput("give one Idempotency-Key header")
		}
		if err := checkIdempotencyKey(vs[0]); err != nil {
			return newOrder{}, err
		}
		key = &idempotencyKey{key: vs[0]}
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return newOrder{}, err
	}
	req, err := decodeOrder(body)
	if err != nil {
		return newOrder{}, err
	}
	if key != nil {
		key.hash = req.hash() // before the id is generated: a retry must match
	}
	if req.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return newOrder{}, err
		}
		req.ID = id.String()
	}
	eventID, err := uuid.NewV7()
	if err != nil {
		return newOrder{}, err
	}
	return newOrder{req: req, eventID: eventID, headers: orderHeaders(r, eventID, req.ID), key: key}, nil
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := &inputError{status: http.StatusRequestEntityTooLarge, msg: "request body is larger than the limit"}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, tooLarge
	}
	if err != nil {
		return nil, badInput("could not read the request body")
	}
	return body, nil
}

// getOrder handles GET /orders/{id}.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		writeError(w, http.StatusNotFound, errNotFound.Error())
		return
	}
	o, err := s.store.order(r.Context(), id)
	if errors.Is(err, errNotFound) {
		writeError(w, http.StatusNotFound, errNotFound.Error())
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// fail answers an error: the client's own mistakes with their text, timeouts
// with 503, anything else with a bare 500 (details go to the log only).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if in, ok := errors.AsType[*inputError](err); ok {
		writeError(w, in.status, in.msg)
		return
	}
	if r.Context().Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("request timed out or was canceled", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "request timed out")
		return
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error")
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "not found")
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCACertsHandler(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	h := withCACerts(next, ca)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/cacerts", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != string(ca) {
		t.Errorf("/cacerts = %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/cacerts", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /cacerts = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("/api bypassed the chain: %d", rec.Code)
	}
}

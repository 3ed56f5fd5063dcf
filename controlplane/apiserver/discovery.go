package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
)

// The generic API server dropped aggregated discovery v2beta1 (Kubernetes 1.33), but kubectl
// 1.27–1.29 ask for it first. Without it they fall back to one request per group version;
// with it they discover everything in one round trip. v2beta1 and v2 have the same schema,
// so the v2beta1 answer is the v2 document with its apiVersion renamed.
const (
	discoveryV2beta1 = "v=v2beta1;as=APIGroupDiscoveryList"
	discoveryV2      = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

// wantsV2beta1Only reports whether an Accept header asks for aggregated discovery v2beta1 and
// not for v2.
func wantsV2beta1Only(accept string) bool {
	return strings.Contains(accept, discoveryV2beta1) && !strings.Contains(accept, "v=v2;as=APIGroupDiscoveryList")
}

// withDiscoveryV2beta1 serves aggregated discovery v2beta1 on /api and /apis from the v2
// handler behind it.
func withDiscoveryV2beta1(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path != "/api" && r.URL.Path != "/apis") || !wantsV2beta1Only(r.Header.Get("Accept")) {
			next.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Accept", discoveryV2)
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r2)
		body := rec.Body.Bytes()
		ctype := rec.Header().Get("Content-Type")
		if rec.Code == http.StatusOK && strings.Contains(ctype, "v=v2;") {
			var doc map[string]any
			if err := json.Unmarshal(body, &doc); err == nil {
				doc["apiVersion"] = "apidiscovery.k8s.io/v2beta1"
				if b, err := json.Marshal(doc); err == nil {
					body = b
					rec.Header().Set("Content-Type", strings.Replace(ctype, "v=v2;", "v=v2beta1;", 1))
				}
			}
		}
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = bytes.NewReader(body).WriteTo(w)
	})
}

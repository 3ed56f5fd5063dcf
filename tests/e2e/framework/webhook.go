package framework

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// WebhookServer serves a validating (/validate: refuses ConfigMaps with a "forbidden" key)
// and a mutating (/mutate: labels ConfigMaps webhook=seen) admission webhook over TLS on
// loopback; it returns its URL and the CA bundle of its certificate.
func WebhookServer(t testing.TB) (string, []byte) {
	t.Helper()
	pair := NewServingPair(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	review := func(w http.ResponseWriter, r *http.Request, decide func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse)) {
		var ar admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		var cm corev1.ConfigMap
		_ = json.Unmarshal(ar.Request.Object.Raw, &cm)
		resp := &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
		decide(&cm, resp)
		ar.Response, ar.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&ar)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse) {
			if _, bad := cm.Data["forbidden"]; bad {
				resp.Allowed = false
				resp.Result = &metav1.Status{Message: "the forbidden key is not allowed", Code: http.StatusForbidden}
			}
		})
	})
	mux.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) {
		review(w, r, func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse) {
			op := `[{"op":"add","path":"/metadata/labels","value":{"webhook":"seen"}}]`
			if cm.Labels != nil {
				op = `[{"op":"add","path":"/metadata/labels/webhook","value":"seen"}]`
			}
			resp.Patch, resp.PatchType = []byte(op), ptr.To(admissionv1.PatchTypeJSONPatch)
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair.TLS(t)}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String(), pair.CAPEM
}

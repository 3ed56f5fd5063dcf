package netutil

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The webhook command serves, over TLS, what admission and CRD conversion webhooks a pod
// would serve, for end-to-end tests of webhooks reached through a Service:
//
//	/validate  refuses a ConfigMap with the data key "forbidden" (message: the forbidden key is not allowed)
//	/mutate    labels every object webhook=mutated
//	/convert   converts example.com Widgets between v1 (spec.color) and v2 (spec.colour)
//
// It speaks admission.k8s.io/v1 AdmissionReview and apiextensions.k8s.io/v1 ConversionReview
// with just the fields it needs, so the image stays small.

type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type admissionRequest struct {
	UID    string          `json:"uid"`
	Object json.RawMessage `json:"object"`
}

type admissionResponse struct {
	UID       string  `json:"uid"`
	Allowed   bool    `json:"allowed"`
	Result    *status `json:"status,omitempty"`
	Patch     []byte  `json:"patch,omitempty"`
	PatchType *string `json:"patchType,omitempty"`
}

type status struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
}

type conversionReview struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Request    *conversionRequest  `json:"request,omitempty"`
	Response   *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               string            `json:"uid"`
	DesiredAPIVersion string            `json:"desiredAPIVersion"`
	Objects           []json.RawMessage `json:"objects"`
}

type conversionResponse struct {
	UID              string           `json:"uid"`
	ConvertedObjects []map[string]any `json:"convertedObjects"`
	Result           status           `json:"result"`
}

// WebhookHandler serves /validate, /mutate and /convert.
func WebhookHandler() http.Handler {
	mux := http.NewServeMux()
	admit := func(decide func(obj map[string]any, resp *admissionResponse)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var ar admissionReview
			if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
				http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
				return
			}
			var obj map[string]any
			_ = json.Unmarshal(ar.Request.Object, &obj)
			resp := &admissionResponse{UID: ar.Request.UID, Allowed: true}
			decide(obj, resp)
			ar.Request, ar.Response = nil, resp
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(ar)
		}
	}
	mux.HandleFunc("/validate", admit(func(obj map[string]any, resp *admissionResponse) {
		if data, _ := obj["data"].(map[string]any); data != nil {
			if _, bad := data["forbidden"]; bad {
				resp.Allowed = false
				resp.Result = &status{Status: "Failure", Message: "the forbidden key is not allowed", Code: http.StatusForbidden}
			}
		}
	}))
	mux.HandleFunc("/mutate", admit(func(obj map[string]any, resp *admissionResponse) {
		md, _ := obj["metadata"].(map[string]any)
		patch := `[{"op":"add","path":"/metadata/labels","value":{"webhook":"mutated"}}]`
		if labels, _ := md["labels"].(map[string]any); labels != nil {
			patch = `[{"op":"add","path":"/metadata/labels/webhook","value":"mutated"}]`
		}
		pt := "JSONPatch"
		resp.Patch, resp.PatchType = []byte(patch), &pt
	}))
	mux.HandleFunc("/convert", func(w http.ResponseWriter, r *http.Request) {
		var cr conversionReview
		if err := json.NewDecoder(r.Body).Decode(&cr); err != nil || cr.Request == nil {
			http.Error(w, "not a ConversionReview", http.StatusBadRequest)
			return
		}
		resp := &conversionResponse{UID: cr.Request.UID, Result: status{Status: "Success"}}
		for _, raw := range cr.Request.Objects {
			obj, err := ConvertWidget(raw, cr.Request.DesiredAPIVersion)
			if err != nil {
				resp.ConvertedObjects, resp.Result = nil, status{Status: "Failure", Message: err.Error()}
				break
			}
			resp.ConvertedObjects = append(resp.ConvertedObjects, obj)
		}
		cr.Request, cr.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cr)
	})
	return mux
}

// ConvertWidget converts one Widget to the desired version: v1's spec.color is v2's
// spec.colour.
func ConvertWidget(raw json.RawMessage, desired string) (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	from, _ := obj["apiVersion"].(string)
	group, fromVersion, _ := strings.Cut(from, "/")
	desiredGroup, toVersion, _ := strings.Cut(desired, "/")
	if group != desiredGroup {
		return nil, fmt.Errorf("cannot convert %s to %s", from, desired)
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec != nil && fromVersion != toVersion {
		names := map[string]string{"v1": "color", "v2": "colour"}
		f, t := names[fromVersion], names[toVersion]
		if f == "" || t == "" {
			return nil, fmt.Errorf("unknown version in %s → %s", from, desired)
		}
		if v, ok := spec[f]; ok {
			delete(spec, f)
			spec[t] = v
		}
	}
	obj["apiVersion"] = desired
	return obj, nil
}

// ServeWebhooks serves WebhookHandler over TLS on addr with the key pair in certFile and
// keyFile until ctx ends.
func ServeWebhooks(ctx context.Context, addr, certFile, keyFile string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: WebhookHandler(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServeTLS("", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

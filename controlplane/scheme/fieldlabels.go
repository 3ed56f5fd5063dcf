package scheme

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fieldLabels lists, per kind, the field selectors that real components use (kubelet's
// spec.nodeName, kubectl describe's involvedObject.*, the namespace controller's status.phase).
// metadata.name and metadata.namespace are accepted for every kind.
var fieldLabels = map[schema.GroupVersionKind][]string{
	corev1.SchemeGroupVersion.WithKind("Pod"): {
		"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
		"spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
	},
	corev1.SchemeGroupVersion.WithKind("Node"):      {"spec.unschedulable"},
	corev1.SchemeGroupVersion.WithKind("Namespace"): {"status.phase"},
	corev1.SchemeGroupVersion.WithKind("Secret"):    {"type"},
	corev1.SchemeGroupVersion.WithKind("Service"):   {"spec.clusterIP", "spec.type"},
	corev1.SchemeGroupVersion.WithKind("Event"): {
		"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type",
	},
	{Group: "events.k8s.io", Version: "v1", Kind: "Event"}: {
		"regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
		"regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
		"reason", "reportingController", "type",
	},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"}:                               {"status.replicas"},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}: {"spec.signerName"},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "ClusterTrustBundle"}:        {"spec.signerName"},
	{Group: "certificates.k8s.io", Version: "v1", Kind: "PodCertificateRequest"}:     {"spec.signerName", "spec.podName", "spec.nodeName"},
	corev1.SchemeGroupVersion.WithKind("ReplicationController"):                      {"status.replicas"},
	{Group: "batch", Version: "v1", Kind: "Job"}:                                     {"status.successful"},
	{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceSlice"}:                 {"spec.nodeName", "spec.driver"},
}

func addFieldLabelConversions(s *runtime.Scheme) error {
	for gvk, labels := range fieldLabels {
		allowed := map[string]bool{"metadata.name": true, "metadata.namespace": true}
		for _, l := range labels {
			allowed[l] = true
		}
		kind := gvk.Kind
		err := s.AddFieldLabelConversionFunc(gvk, func(label, value string) (string, string, error) {
			if allowed[label] {
				return label, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", label)
		})
		if err != nil {
			return fmt.Errorf("field labels of %s: %w", kind, err)
		}
	}
	return nil
}

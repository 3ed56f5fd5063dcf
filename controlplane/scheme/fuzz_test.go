package scheme_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/controlplane/printers"
	"github.com/skiff-sh/skiff/controlplane/scheme"
	"github.com/skiff-sh/skiff/controlplane/validation"
)

// FuzzDecode feeds API request bodies (JSON, YAML or protobuf) through what the API server
// does with them before storage: decode, default, validate, print. Bad input must come back as
// an error, never a panic.
func FuzzDecode(f *testing.F) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	proto, err := runtime.Encode(protobufEncoder(), pod)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(proto)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{port: 80, targetPort: web}]\n"))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1"}}}]}}}}`))
	f.Add([]byte(`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"n"},"spec":{"podSelector":{},"ingress":[{"ports":[{"port":"http"}]}]}}`))
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"completionMode":"Indexed","completions":3,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}`))
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"schedule":"*/5 * * * *","timeZone":"Europe/Paris","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"OnFailure","containers":[{"name":"c","image":"i"}]}}}}}}`))
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"schedule":"TZ=0 * * * * *"}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"r"},"spec":{"replicas":2,"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`))
	f.Add([]byte(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"p"},"spec":{"minAvailable":"50%","selector":{"matchLabels":{"a":"b"}}}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"`))
	f.Add([]byte("k8s\x00\x0a\xff\xff\xff"))
	decoder := scheme.Codecs.UniversalDeserializer()
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, _, err := decoder.Decode(body, nil, nil)
		if err != nil {
			return
		}
		scheme.Scheme.Default(obj)
		ctx := context.Background()
		switch o := obj.(type) {
		case *corev1.Pod:
			validation.Pod(o)
			validation.PodUpdate(o, o.DeepCopy())
			printers.Pods.ConvertToTable(ctx, o, nil)
		case *corev1.Service:
			validation.Service(o)
			validation.ServiceUpdate(o, o.DeepCopy())
			printers.Services.ConvertToTable(ctx, o, nil)
		case *corev1.Node:
			validation.Node(o)
			printers.Nodes.ConvertToTable(ctx, o, nil)
		case *corev1.ConfigMap:
			validation.ConfigMap(o)
		case *corev1.Secret:
			validation.Secret(o)
		case *corev1.Namespace:
			validation.Namespace(o)
		case *corev1.Event:
			printers.Events.ConvertToTable(ctx, o, nil)
		case *appsv1.Deployment:
			validation.Deployment(o)
			printers.Deployments.ConvertToTable(ctx, o, nil)
		case *appsv1.ReplicaSet:
			validation.ReplicaSet(o)
		case *appsv1.DaemonSet:
			validation.DaemonSet(o)
			printers.DaemonSets.ConvertToTable(ctx, o, nil)
		case *batchv1.Job:
			validation.Job(o)
			validation.JobUpdate(o, o.DeepCopy())
			printers.Jobs.ConvertToTable(ctx, o, nil)
		case *batchv1.CronJob:
			validation.CronJob(o)
			printers.CronJobs.ConvertToTable(ctx, o, nil)
		case *corev1.ReplicationController:
			validation.ReplicationController(o)
			printers.ReplicationControllers.ConvertToTable(ctx, o, nil)
		case *policyv1.PodDisruptionBudget:
			validation.PodDisruptionBudget(o)
			printers.PodDisruptionBudgets.ConvertToTable(ctx, o, nil)
		case *discoveryv1.EndpointSlice:
			validation.EndpointSlice(o)
			printers.EndpointSlices.ConvertToTable(ctx, o, nil)
		case *networkingv1.NetworkPolicy:
			validation.NetworkPolicy(o)
			printers.NetworkPolicies.ConvertToTable(ctx, o, nil)
		}
	})
}

func protobufEncoder() runtime.Encoder {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	return scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
}

package scheme_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
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
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"s"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}},"volumeClaimTemplates":[{"metadata":{"name":"d"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"p"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"local":{"path":"/mnt"},"nodeAffinity":{"required":{"nodeSelectorTerms":[]}}}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOncePod","ReadOnlyMany"],"resources":{"requests":{"storage":"-1"}}}}`))
	f.Add([]byte(`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"i"},"spec":{"rules":[{"host":"*.example.com","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"s","port":{"name":"http"}}}}]}}]}}`))
	f.Add([]byte(`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"h"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"d"},"maxReplicas":3,"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization"}}}]}}`))
	f.Add([]byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"r"},"spec":{"driver":"d.example.com","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,"devices":[{"name":"a"},{"name":"a"}]}}`))
	f.Add([]byte(`{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"system-x"},"value":2000000001}`))
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
		case *appsv1.StatefulSet:
			validation.StatefulSet(o)
			validation.StatefulSetUpdate(o, o.DeepCopy())
			printers.StatefulSets.ConvertToTable(ctx, o, nil)
		case *corev1.PersistentVolume:
			validation.PersistentVolume(o)
			validation.PersistentVolumeUpdate(o, o.DeepCopy())
			printers.PersistentVolumes.ConvertToTable(ctx, o, nil)
		case *corev1.PersistentVolumeClaim:
			validation.PersistentVolumeClaim(o)
			validation.PersistentVolumeClaimUpdate(o, o.DeepCopy())
			printers.PersistentVolumeClaims.ConvertToTable(ctx, o, nil)
		case *networkingv1.Ingress:
			validation.Ingress(o)
			printers.Ingresses.ConvertToTable(ctx, o, nil)
		case *autoscalingv2.HorizontalPodAutoscaler:
			validation.HorizontalPodAutoscaler(o)
			printers.HorizontalPodAutoscalers.ConvertToTable(ctx, o, nil)
		case *resourcev1.ResourceSlice:
			validation.ResourceSlice(o)
			printers.ResourceSlices.ConvertToTable(ctx, o, nil)
		case *schedulingv1.PriorityClass:
			validation.PriorityClass(o)
			printers.PriorityClasses.ConvertToTable(ctx, o, nil)
		}
	})
}

func protobufEncoder() runtime.Encoder {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	return scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
}

package ownership

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ClaimPods carries out Claim for the pods of a workload (owner, of kind gvk, selecting
// with sel) with patches through client, and returns the pods it then controls.
// canAdopt, if set, is asked once, before the first adoption (a fresh read that the owner
// still exists, as upstream does); its error stops adoption.
func ClaimPods(ctx context.Context, client kubernetes.Interface, owner metav1.Object, gvk schema.GroupVersionKind, sel labels.Selector,
	pods []*corev1.Pod, canAdopt func() error) ([]*corev1.Pod, error) {
	objs := make([]metav1.Object, len(pods))
	for i, p := range pods {
		objs[i] = p
	}
	checked := false
	var checkErr error
	owned, err := Apply(Claim(owner, sel, objs),
		func(i int) error {
			if canAdopt != nil && !checked {
				checked, checkErr = true, canAdopt()
			}
			if checkErr != nil {
				return checkErr
			}
			patch, err := AdoptPatch(owner, gvk, pods[i].UID)
			if err == nil {
				_, err = client.CoreV1().Pods(owner.GetNamespace()).Patch(ctx, pods[i].Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			}
			return err
		},
		func(i int) error {
			_, err := client.CoreV1().Pods(owner.GetNamespace()).Patch(ctx, pods[i].Name, types.StrategicMergePatchType, ReleasePatch(owner, pods[i].UID), metav1.PatchOptions{})
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("pods of %s %s: %w", gvk.Kind, owner.GetName(), err)
	}
	out := make([]*corev1.Pod, len(owned))
	for k, i := range owned {
		out[k] = pods[i]
	}
	return out, nil
}

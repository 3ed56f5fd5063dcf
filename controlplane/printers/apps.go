package printers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Deployments prints NAME READY UP-TO-DATE AVAILABLE AGE, wide: CONTAINERS IMAGES SELECTOR.
var Deployments = New(func(o runtime.Object) []any {
	d := o.(*appsv1.Deployment)
	want := int32(0)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	c, i := containersAndImages(d.Spec.Template.Spec)
	return []any{fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, want), int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas), Age(d.CreationTimestamp), c, i, selector(d.Spec.Selector)}
},
	Column{Name: "Ready", Description: "Number of the pod with ready state"},
	Column{Name: "Up-to-date", Type: "integer", Description: "Total number of non-terminated pods targeted by this deployment that have the desired template spec."},
	Column{Name: "Available", Type: "integer", Description: "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// ReplicaSets prints NAME DESIRED CURRENT READY AGE, wide: CONTAINERS IMAGES SELECTOR.
var ReplicaSets = New(func(o runtime.Object) []any {
	rs := o.(*appsv1.ReplicaSet)
	want := int32(0)
	if rs.Spec.Replicas != nil {
		want = *rs.Spec.Replicas
	}
	c, i := containersAndImages(rs.Spec.Template.Spec)
	return []any{int64(want), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), Age(rs.CreationTimestamp), c, i, selector(rs.Spec.Selector)}
},
	Column{Name: "Desired", Type: "integer", Description: "Number of desired pods."},
	Column{Name: "Current", Type: "integer", Description: "Number of actual replicas."},
	Column{Name: "Ready", Type: "integer", Description: "Number of ready replicas."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// DaemonSets prints NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE.
var DaemonSets = New(func(o runtime.Object) []any {
	ds := o.(*appsv1.DaemonSet)
	c, i := containersAndImages(ds.Spec.Template.Spec)
	return []any{int64(ds.Status.DesiredNumberScheduled), int64(ds.Status.CurrentNumberScheduled), int64(ds.Status.NumberReady),
		int64(ds.Status.UpdatedNumberScheduled), int64(ds.Status.NumberAvailable), none(labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector)),
		Age(ds.CreationTimestamp), c, i, selector(ds.Spec.Selector)}
},
	Column{Name: "Desired", Type: "integer", Description: "Number of nodes that should run the daemon pod."},
	Column{Name: "Current", Type: "integer", Description: "Number of nodes running at least one daemon pod."},
	Column{Name: "Ready", Type: "integer", Description: "Number of nodes with a ready daemon pod."},
	Column{Name: "Up-to-date", Type: "integer", Description: "Number of nodes running the updated daemon pod."},
	Column{Name: "Available", Type: "integer", Description: "Number of nodes with an available daemon pod."},
	Column{Name: "Node Selector", Description: "Node selector of the pod template."},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
	Column{Name: "Selector", Wide: true, Description: "Label selector for pods."},
)

// StatefulSets prints NAME READY AGE, wide: CONTAINERS IMAGES.
var StatefulSets = New(func(o runtime.Object) []any {
	ss := o.(*appsv1.StatefulSet)
	want := int32(0)
	if ss.Spec.Replicas != nil {
		want = *ss.Spec.Replicas
	}
	c, i := containersAndImages(ss.Spec.Template.Spec)
	return []any{fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, want), Age(ss.CreationTimestamp), c, i}
},
	Column{Name: "Ready", Description: "Number of the pod with ready state"},
	AgeColumn,
	Column{Name: "Containers", Wide: true, Description: "Names of each container in the template."},
	Column{Name: "Images", Wide: true, Description: "Images referenced by each container in the template."},
)

// Package namespace empties namespaces that are being deleted: it deletes every namespaced
// object in them, waits until none is left, removes the "kubernetes" finalizer through
// namespaces/finalize and deletes the namespace for good — upstream's namespace controller.
package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "namespace-controller"

// Controller deletes namespace contents.
type Controller struct {
	client     kubernetes.Interface
	metadata   metadata.Interface
	discovery  discovery.DiscoveryInterface
	namespaces corelisters.NamespaceLister
	synced     cache.InformerSynced
	loop       *loop.Loop
	log        *slog.Logger
}

// New wires the controller.
func New(client kubernetes.Interface, md metadata.Interface, ns coreinformers.NamespaceInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, metadata: md, discovery: client.Discovery(), namespaces: ns.Lister(),
		synced: ns.Informer().HasSynced, log: log.With("controller", Name)}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = ns.Informer().AddEventHandler(c.loop.Handler())
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.loop.Run(ctx, 2)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	if slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		r := c.deleteContent(ctx, name)
		c.log.Debug("namespace deletion pass", "namespace", name, "remaining", r.Remaining, "errors", fmt.Sprint(r.Errors))
		if err := c.writeConditions(ctx, ns, Conditions(r, time.Now())); err != nil {
			return err
		}
		if len(r.Errors) > 0 || len(r.Remaining) > 0 {
			c.loop.AddAfter(name, 2*time.Second)
			return nil
		}
		ns, err = c.namespaces.Get(name)
		if err != nil {
			return err
		}
		ns = ns.DeepCopy()
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		if ns, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if len(ns.Spec.Finalizers) > 0 {
		return nil // someone else's finalizer
	}
	err = c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		c.log.Info("namespace deleted", "namespace", name)
	}
	return err
}

// Report is what one pass over a terminating namespace found.
type Report struct {
	// DiscoveryErr is set when the served resources could not all be listed.
	DiscoveryErr error
	// Errors are failures to delete or list content (pods not gone yet among them: their
	// deletion comes first).
	Errors []error
	// Remaining counts the objects left per resource, Finalizers those left per finalizer.
	Remaining  map[string]int
	Finalizers map[string]int
}

// deleteContent deletes everything in the namespace, pods first as upstream's ordered
// namespace deletion: until every pod is gone nothing else is deleted, so a pod's
// ConfigMaps, Secrets and volumes stay while it shuts down.
func (c *Controller) deleteContent(ctx context.Context, ns string) Report {
	r := Report{Remaining: map[string]int{}, Finalizers: map[string]int{}}
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil {
		r.DiscoveryErr = err
		if len(lists) == 0 {
			return r
		}
	}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	if n := c.deleteResource(ctx, ns, pods, true, &r); n > 0 {
		r.Errors = append(r.Errors, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns, pods))
		return r
	}
	seen := sets.New("pods")
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			verbs := sets.New(res.Verbs...)
			if strings.Contains(res.Name, "/") || !verbs.Has("list") || !verbs.Has("delete") || seen.Has(res.Name) {
				continue
			}
			seen.Insert(res.Name) // events and events.k8s.io events are the same objects
			c.deleteResource(ctx, ns, gv.WithResource(res.Name), verbs.Has("deletecollection"), &r)
		}
	}
	return r
}

// deleteResource deletes one resource's objects in ns and returns how many are left.
func (c *Controller) deleteResource(ctx context.Context, ns string, gvr schema.GroupVersionResource, collection bool, r *Report) int {
	res := c.metadata.Resource(gvr).Namespace(ns)
	if collection {
		if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			r.Errors = append(r.Errors, fmt.Errorf("delete %s in %s: %w", gvr.Resource, ns, err))
		}
	}
	items, err := res.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		r.Errors = append(r.Errors, fmt.Errorf("list %s in %s: %w", gvr.Resource, ns, err))
		return 0
	}
	for _, it := range items.Items {
		if it.DeletionTimestamp == nil {
			if err := res.Delete(ctx, it.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				r.Errors = append(r.Errors, fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, ns, it.Name, err))
			}
		}
		for _, f := range it.Finalizers {
			r.Finalizers[f]++
		}
	}
	if n := len(items.Items); n > 0 {
		key := gvr.Resource
		if gvr.Group != "" {
			key += "." + gvr.Group
		}
		r.Remaining[key] += n
		return n
	}
	return 0
}

// Conditions are the namespace's deletion conditions for a report, with upstream's types,
// reasons and messages; a condition that holds nothing is False.
func Conditions(r Report, now time.Time) []corev1.NamespaceCondition {
	cond := func(t corev1.NamespaceConditionType, bad bool, okReason, badReason, msg string) corev1.NamespaceCondition {
		c := corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: okReason, LastTransitionTime: metav1.NewTime(now)}
		if bad {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, badReason, msg
		}
		return c
	}
	var discoveryMsg string
	if r.DiscoveryErr != nil {
		discoveryMsg = "Discovery failed for some groups: " + r.DiscoveryErr.Error()
	}
	var failures []string
	for _, e := range r.Errors {
		failures = append(failures, e.Error())
	}
	return []corev1.NamespaceCondition{
		cond(corev1.NamespaceDeletionDiscoveryFailure, r.DiscoveryErr != nil, "ResourcesDiscovered", "DiscoveryFailed", discoveryMsg),
		cond(corev1.NamespaceDeletionGVParsingFailure, false, "ParsedGroupVersions", "GroupVersionParsingFailed", ""),
		cond(corev1.NamespaceDeletionContentFailure, len(r.Errors) > 0, "ContentDeleted", "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %s", len(r.Errors), strings.Join(failures, ", "))),
		cond(corev1.NamespaceContentRemaining, len(r.Remaining) > 0, "ContentRemoved", "SomeResourcesRemain",
			"Some resources are remaining: "+counts(r.Remaining, "%s has %d resource instances")),
		cond(corev1.NamespaceFinalizersRemaining, len(r.Finalizers) > 0, "ContentHasNoFinalizers", "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+counts(r.Finalizers, "%s in %d resource instances")),
	}
}

func counts(m map[string]int, format string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(format, k, m[k])
	}
	return strings.Join(parts, ", ")
}

// writeConditions puts the conditions on the namespace's status when they changed (a kept
// condition keeps its transition time).
func (c *Controller) writeConditions(ctx context.Context, ns *corev1.Namespace, want []corev1.NamespaceCondition) error {
	cp := ns.DeepCopy()
	changed := false
	for _, w := range want {
		i := slices.IndexFunc(cp.Status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == w.Type })
		switch {
		case i < 0:
			cp.Status.Conditions = append(cp.Status.Conditions, w)
			changed = true
		case cp.Status.Conditions[i].Status != w.Status || cp.Status.Conditions[i].Reason != w.Reason || cp.Status.Conditions[i].Message != w.Message:
			if cp.Status.Conditions[i].Status == w.Status {
				w.LastTransitionTime = cp.Status.Conditions[i].LastTransitionTime
			}
			cp.Status.Conditions[i] = w
			changed = true
		}
	}
	if !changed {
		return nil
	}
	_, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed meanwhile: the next pass writes them
	}
	return err
}

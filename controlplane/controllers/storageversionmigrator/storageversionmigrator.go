// Package storageversionmigrator carries out StorageVersionMigrations
// (storagemigration.k8s.io/v1), as kube-controller-manager's storage-version-migrator
// controller: every object of the migration's resource is written back through the API
// server, so etcd holds each in the current storage version and under the current encryption
// key (after `--encryption-provider-config` gained a new first key, say). The write is a no-op
// patch: the API server rewrites an object only when what it read was stale — another
// version, another key — so a migration of objects already current changes nothing.
//
// A migration is Running while it goes, then Succeeded with status.resourceVersion the list's
// resourceVersion, or Failed when its resource is not served.
package storageversionmigrator

import (
	"context"
	"fmt"
	"log/slog"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	svminformers "k8s.io/client-go/informers/storagemigration/v1"
	"k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/loop"
)

// Name is the controller's name (and its service account's).
const Name = "storage-version-migrator-controller"

// pageSize is how many objects are listed at a time.
const pageSize = 500

// Mapper finds the version a resource is served in (a discovery-backed REST mapper).
type Mapper interface {
	ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error)
}

// Controller runs migrations.
type Controller struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	mapper  Mapper
	svms    svmlisters.StorageVersionMigrationLister
	synced  []cache.InformerSynced
	loop    *loop.Loop
	log     *slog.Logger
}

// New wires the controller to a StorageVersionMigration informer.
func New(client kubernetes.Interface, dyn dynamic.Interface, mapper Mapper, svms svminformers.StorageVersionMigrationInformer, log *slog.Logger) *Controller {
	c := &Controller{client: client, dynamic: dyn, mapper: mapper, svms: svms.Lister(),
		synced: []cache.InformerSynced{svms.Informer().HasSynced}, log: log.With("controller", Name)}
	c.loop = loop.New(Name, c.sync, log)
	_, _ = svms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.loop.Enqueue,
		UpdateFunc: func(_, cur any) { c.loop.Enqueue(cur) },
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	c.loop.Run(ctx, 1)
}

// Finished says whether a migration has its outcome.
func Finished(m *storagemigrationv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, string(storagemigrationv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(m.Status.Conditions, string(storagemigrationv1.MigrationFailed))
}

func (c *Controller) sync(ctx context.Context, name string) error {
	m, err := c.svms.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if Finished(m) {
		return nil
	}
	gr := m.Spec.Resource
	gvr, err := c.mapper.ResourceFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
	if err != nil {
		return c.finish(ctx, m, storagemigrationv1.MigrationFailed, "ResourceNotFound",
			fmt.Sprintf("resource %s is not served: %v", gr.String(), err), "")
	}
	if !meta.IsStatusConditionTrue(m.Status.Conditions, string(storagemigrationv1.MigrationRunning)) {
		if m, err = c.setCondition(ctx, m, storagemigrationv1.MigrationRunning, metav1.ConditionTrue, "Migrating", "migrating "+gvr.String(), ""); err != nil {
			return err
		}
	}
	rv, n, err := c.migrate(ctx, gvr)
	if err != nil {
		return err // retried with backoff: what was rewritten stays rewritten
	}
	c.log.Info("migrated", "migration", name, "resource", gvr.String(), "objects", n)
	return c.finish(ctx, m, storagemigrationv1.MigrationSucceeded, "Migrated", fmt.Sprintf("%d objects of %s rewritten", n, gvr.String()), rv)
}

// migrate writes back every object of gvr, page by page; it returns the first page's
// resourceVersion (the point the migration covers up to) and the number of objects.
func (c *Controller) migrate(ctx context.Context, gvr schema.GroupVersionResource) (string, int, error) {
	res := c.dynamic.Resource(gvr)
	var rv, cont string
	n := 0
	for {
		list, err := res.List(ctx, metav1.ListOptions{Limit: pageSize, Continue: cont})
		if err != nil {
			return "", n, err
		}
		if rv == "" {
			rv = list.GetResourceVersion()
		}
		for _, obj := range list.Items {
			ri := dynamic.ResourceInterface(res)
			if ns := obj.GetNamespace(); ns != "" {
				ri = c.dynamic.Resource(gvr).Namespace(ns)
			}
			_, err := ri.Patch(ctx, obj.GetName(), types.MergePatchType, []byte("{}"), metav1.PatchOptions{FieldManager: Name})
			if err != nil && !apierrors.IsNotFound(err) {
				return "", n, fmt.Errorf("%s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
			}
			n++
		}
		if cont = list.GetContinue(); cont == "" {
			return rv, n, nil
		}
	}
}

func (c *Controller) finish(ctx context.Context, m *storagemigrationv1.StorageVersionMigration, t storagemigrationv1.MigrationConditionType,
	reason, message, rv string) error {
	m, err := c.setCondition(ctx, m, t, metav1.ConditionTrue, reason, message, rv)
	if err != nil {
		return err
	}
	_, err = c.setCondition(ctx, m, storagemigrationv1.MigrationRunning, metav1.ConditionFalse, reason, message, rv)
	return err
}

func (c *Controller) setCondition(ctx context.Context, m *storagemigrationv1.StorageVersionMigration, t storagemigrationv1.MigrationConditionType,
	status metav1.ConditionStatus, reason, message, rv string) (*storagemigrationv1.StorageVersionMigration, error) {
	cp := m.DeepCopy()
	meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: message,
		ObservedGeneration: m.Generation})
	if rv != "" {
		cp.Status.ResourceVersion = rv
	}
	return c.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, cp, metav1.UpdateOptions{})
}

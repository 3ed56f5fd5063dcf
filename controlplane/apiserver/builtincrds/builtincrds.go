// Package builtincrds installs the CustomResourceDefinitions skiff serves out of the box —
// today ClusterNetworkPolicy (sigs.k8s.io/network-policy-api), which the node agents
// enforce — as k3s deploys its own CRDs at start: created when missing, brought to this
// build's definition when an older one is stored, left alone when equal.
package builtincrds

import (
	"context"
	"embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Definitions are the built-in CRDs, parsed.
func Definitions() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("built-in CRD %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Ensure creates each built-in CRD, or updates one stored with another spec or bundle
// annotations (an upgrade of skiff that brings a newer definition).
func Ensure(ctx context.Context, client apiextensionsclient.Interface) error {
	defs, err := Definitions()
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range defs {
		have, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := crds.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating CRD %s: %w", want.Name, err)
			}
			continue
		}
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(have.Spec, want.Spec) && equality.Semantic.DeepEqual(have.Annotations, want.Annotations) {
			continue
		}
		updated := have.DeepCopy()
		updated.Spec, updated.Annotations = want.Spec, want.Annotations
		if _, err := crds.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating CRD %s: %w", want.Name, err)
		}
	}
	return nil
}

package agent

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	cnpinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/skiff-sh/skiff/dataplane/netpol"
)

// clusterNetworkPolicies adds the ClusterNetworkPolicy informer to the enforcer's when the
// API server serves policy.networking.k8s.io/v1beta1 (every skiff server installs its CRD at
// start; an older one does not, and the agent then enforces NetworkPolicies alone rather than
// wait for a resource that will not come).
func clusterNetworkPolicies(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, informers *netpol.Informers) error {
	if _, err := client.Discovery().ServerResourcesForGroupVersion(cnpv1beta1.GroupVersion.String()); err != nil {
		if apierrors.IsNotFound(err) {
			return errors.New("the API server does not serve " + cnpv1beta1.GroupVersion.String())
		}
		return err
	}
	c, err := cnpclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	f := cnpinformers.NewSharedInformerFactory(c, 0)
	informers.ClusterNetworkPolicies = f.Policy().V1beta1().ClusterNetworkPolicies().Informer()
	informers.StartCluster = func() { f.Start(ctx.Done()) }
	return nil
}
